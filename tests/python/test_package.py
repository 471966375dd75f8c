"""Package metadata and the C++ -> Python exception mapping."""

import importlib
import importlib.metadata
import pathlib
import pickle
import re
import sys

import _feedline_testing
import pytest

import feedline
from feedline import _feedline_ext

PYPROJECT = pathlib.Path(__file__).resolve().parents[2] / "pyproject.toml"

# C++ exception classes that map to a feedline.Error subclass of the same name.
ERROR_KINDS = [
    "Error",
    "IoError",
    "FormatError",
    "DecodeError",
    "Cancelled",
    "Internal",
    "Timeout",
    "TooManyFailures",
    "PipelineFailure",
]

# C++ exception classes that derive from a standard exception and therefore
# map to the corresponding built-in Python exception.
BUILTIN_KINDS = {
    "InvalidArgument": ValueError,
    "OutOfRange": IndexError,
}


def assert_test_message(error, kind):
    """Checks the message that raise_error(kind) gives its exception."""
    message = str(error)
    if kind == "PipelineFailure":
        # An ExceptionGroup whose message is built from the failed stages: one
        # stage named "test" here, whose cause became a feedline.Error.
        assert error.message.startswith("pipeline stages failed:")
        assert error.message.endswith("[test] test: PipelineFailure")
        if sys.version_info >= (3, 11):
            assert isinstance(error, ExceptionGroup)  # noqa: F821 (3.11+)
        (cause,) = error.exceptions
        assert type(cause) is feedline.Error
        assert str(cause) == "test: PipelineFailure"
        assert "Pipeline stage: test" in cause.__notes__
    else:
        assert message == f"test: {kind}"


def test_version_matches_pyproject():
    # pyproject.toml reads the version from CMakeLists.txt (one place).
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    with PYPROJECT.open("rb") as f:
        project = tomllib.load(f)
    assert "version" not in project["project"] and project["project"]["dynamic"] == ["version"]
    regex = project["tool"]["scikit-build"]["metadata"]["version"]["regex"]
    expected = re.search(regex, (PYPROJECT.parent / "CMakeLists.txt").read_text()).group("value")
    assert isinstance(feedline.__version__, str)
    assert re.fullmatch(r"\d+\.\d+\.\d+", feedline.__version__)
    assert feedline.__version__ == expected


def test_error_is_runtime_error():
    assert issubclass(feedline.Error, RuntimeError)


@pytest.mark.parametrize("kind", ERROR_KINDS)
def test_error_class_is_exported_and_derives_from_error(kind):
    cls = getattr(feedline, kind)
    if kind == "PipelineFailure":
        # Defined in Python so that it can be an ExceptionGroup.
        assert sys.version_info < (3, 11) or issubclass(cls, ExceptionGroup)  # noqa: F821
    else:
        assert cls is getattr(_feedline_ext, kind)
    assert issubclass(cls, feedline.Error)
    assert cls.__name__ == kind
    assert cls.__module__ == "feedline"
    assert kind in feedline.__all__


def test_timeout_is_also_builtin_timeout_error():
    assert issubclass(feedline.Timeout, TimeoutError)


@pytest.mark.parametrize("kind", ERROR_KINDS)
def test_cpp_error_raises_its_python_class(kind):
    cls = getattr(feedline, kind)
    with pytest.raises(cls) as info:
        _feedline_testing.raise_error(kind)
    assert type(info.value) is cls
    assert_test_message(info.value, kind)


@pytest.mark.parametrize("kind", ERROR_KINDS)
def test_cpp_error_is_caught_as_feedline_error(kind):
    with pytest.raises(feedline.Error) as info:
        _feedline_testing.raise_error(kind)
    assert_test_message(info.value, kind)


@pytest.mark.parametrize(("kind", "builtin"), sorted(BUILTIN_KINDS.items()))
def test_cpp_std_derived_error_raises_builtin(kind, builtin):
    with pytest.raises(builtin) as info:
        _feedline_testing.raise_error(kind)
    assert type(info.value) is builtin
    assert not isinstance(info.value, feedline.Error)
    assert str(info.value) == f"test: {kind}"


def test_unknown_kind_raises_value_error():
    with pytest.raises(ValueError, match="unknown kind 'NoSuchError'"):
        _feedline_testing.raise_error("NoSuchError")


@pytest.mark.parametrize("kind", ERROR_KINDS)
def test_error_survives_pickling(kind):
    with pytest.raises(feedline.Error) as info:
        _feedline_testing.raise_error(kind)
    clone = pickle.loads(pickle.dumps(info.value))
    assert type(clone) is type(info.value)
    assert_test_message(clone, kind)


def test_installed_package_has_no_test_hooks():
    # The test ops and error hooks live in _feedline_testing, which is built
    # for the tests only (tests/python/native/) and never installed.
    assert not hasattr(_feedline_ext, "testing")
    assert not hasattr(_feedline_ext, "_raise_for_test")
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("feedline._feedline_ext.testing")
    installed = [str(f) for f in importlib.metadata.files("feedline") or []]
    assert installed, "feedline is not installed as a distribution"
    assert not [f for f in installed if "testing" in f], installed
    assert not [f for f in installed if pathlib.PurePath(f).name.startswith("_feedline_ext") and "test" in f]
    # The test extension is a separate module, found outside the package.
    assert pathlib.Path(feedline.__file__).parent not in pathlib.Path(_feedline_testing.__file__).parents


def test_extension_api_capsule_is_published():
    # Other extensions import it with PyCapsule_Import (feedline/pipeline/extension_api.h).
    assert type(_feedline_ext._extension_api).__name__ == "PyCapsule"
    assert "feedline._feedline_ext._extension_api" in repr(_feedline_ext._extension_api)


def test_spdl_io_names_and_positional_config_arguments():
    import feedline.io as fio

    # Names SPDL's spdl.io has that migrating code imports.
    for name in ("DemuxConfig", "DecodeConfig", "VideoEncoder", "AudioEncoder", "WAVHeader"):
        assert name in fio.__all__ and getattr(fio, name) is not None, name
    assert isinstance(fio.demux_config(), fio.DemuxConfig)
    assert isinstance(fio.decode_config(), fio.DecodeConfig)
    # SPDL's parameters of the config factories take positions too.
    assert fio.demux_config("rawvideo", {"video_size": "4x4"}).format == "rawvideo"
    assert fio.decode_config("h264").decoder == "h264"
