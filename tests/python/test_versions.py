"""feedline.__version__ and feedline.io.utils's versions: one source (the
CMake project version), and the libraries actually loaded."""

import ctypes
import importlib.metadata
import pathlib
import re
import shutil
import subprocess

import pytest

import feedline
from feedline import _feedline_ext
from feedline.io import utils

ROOT = pathlib.Path(__file__).resolve().parents[2]
FFMPEG_LIBS = ["libavformat", "libavcodec", "libavutil", "libavfilter", "libswscale", "libswresample"]


def test_version_is_the_cmake_project_version():
    cmake = (ROOT / "CMakeLists.txt").read_text()
    expected = re.search(r"project\(feedline\s+VERSION\s+(\d+\.\d+\.\d+)", cmake).group(1)
    assert feedline.__version__ == expected
    # The package metadata pip installed comes from the same place.
    assert importlib.metadata.version("feedline") == expected


def test_library_versions_name_feedline_ffmpeg_jpeg_png_and_deflate():
    versions = utils.get_library_versions()
    assert list(versions) == ["feedline", *FFMPEG_LIBS, "libjpeg-turbo", "libpng", "libdeflate"]
    assert versions["feedline"] == feedline.__version__
    for name, version in versions.items():
        # libdeflate numbers its releases major.minor.
        pattern = r"\d+\.\d+" if name == "libdeflate" else r"\d+\.\d+\.\d+"
        assert re.fullmatch(pattern, version), (name, version)
    ffmpeg = utils.get_ffmpeg_versions()
    assert list(ffmpeg) == FFMPEG_LIBS
    for lib in FFMPEG_LIBS:
        assert ".".join(map(str, ffmpeg[lib])) == versions[lib]


def loaded_library(stem):
    """The path of the shared library `stem` (e.g. "libavcodec") mapped
    into this process."""
    for line in pathlib.Path("/proc/self/maps").read_text().splitlines():
        path = line.split()[-1]
        if re.search(rf"/{re.escape(stem)}\.so[.\d]*$", path):
            return path
    pytest.skip(f"{stem} is not mapped as a shared library")


@pytest.mark.parametrize("lib", FFMPEG_LIBS)
def test_ffmpeg_versions_are_those_of_the_loaded_libraries(lib):
    fn = getattr(ctypes.CDLL(loaded_library(lib)), lib[3:] + "_version")
    fn.restype = ctypes.c_uint
    v = fn()
    assert utils.get_ffmpeg_versions()[lib] == (v >> 16, (v >> 8) & 0xFF, v & 0xFF)


def test_libpng_version_is_that_of_the_loaded_library():
    fn = ctypes.CDLL(loaded_library("libpng16")).png_access_version_number
    fn.restype = ctypes.c_uint32
    v = fn()  # major * 10000 + minor * 100 + release
    assert utils.get_library_versions()["libpng"] == f"{v // 10000}.{v // 100 % 100}.{v % 100}"


@pytest.mark.parametrize(
    ("key", "stem", "module"),
    [("libjpeg-turbo", "libjpeg", "libturbojpeg"), ("libdeflate", "libdeflate", "libdeflate")],
)
def test_version_is_the_one_compiled_against(key, stem, module):
    # TurboJPEG and libdeflate have no run-time version query: the version
    # reported is that of the headers feedline was built with, which
    # pkg-config describes.
    assert loaded_library(stem)
    if shutil.which("pkg-config") is None:
        pytest.skip("needs pkg-config")
    done = subprocess.run(["pkg-config", "--modversion", module], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"pkg-config has no {module}")
    assert utils.get_library_versions()[key] == done.stdout.strip()


def test_decoders_by_codec():
    decoders = utils.get_ffmpeg_decoders()
    assert decoders["h264"][0] == "h264"
    assert "png" in decoders["png"] and "mjpeg" in decoders["mjpeg"]
    assert all(isinstance(names, list) and names for names in decoders.values())


def test_build_type_is_a_cmake_configuration():
    assert _feedline_ext._build_type in {"Release", "Debug", "RelWithDebInfo", "MinSizeRel"}
