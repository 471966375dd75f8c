"""tools/check_layers.py: the layer check that `make lint` runs."""

import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
CHECK = ROOT / "tools" / "check_layers.py"

# A tree in which every include keeps to its layer.
GOOD = {
    "include/feedline/base/error.h": "#pragma once\n#include <string>\n",
    "include/feedline/concurrency/mutex.h": '#include "feedline/base/error.h"\n',
    "include/feedline/pipeline/op.h": '#include "feedline/concurrency/mutex.h"\n',
    "include/feedline/detail/typed.h": '#include "feedline/pipeline/op.h"\n',
    "include/feedline/media/image.h": '#include "feedline/base/error.h"\n',
    "include/feedline/io/file.h": '#include "feedline/base/error.h"\n',
    "include/feedline/ops/image_ops.h": (
        '#include "feedline/pipeline/op.h"\n#include "feedline/media/image.h"\n#include "feedline/io/file.h"\n'
    ),
    "src/pipeline/impl.h": '#include "feedline/detail/typed.h"\n',
    "src/pipeline/run.cc": '#include "pipeline/impl.h"\n#include "impl.h"\n',
    "src/media/codecs.h": "#include <turbojpeg.h>\n#include <png.h>\n",
    "src/media/ffmpeg/ffmpeg.h": '#include <libavcodec/avcodec.h>\n#include "media/codecs.h"\n',
    "src/io/zip.cc": "#include <libdeflate.h>\n",
    "src/media/png_write.cc": "#include <libdeflate.h>\n",
}

# One crossing each: (path, text, what the message says).
BAD = [
    ("include/feedline/base/bad.h", '#include "feedline/pipeline/op.h"\n', "layer 'base' includes"),
    ("include/feedline/pipeline/bad.h", '#include "feedline/io/file.h"\n', "layer 'pipeline' includes"),
    ("src/io/bad.cc", '#include "feedline/media/image.h"\n', "layer 'io' includes"),
    ("src/media/bad.cc", '#include "feedline/ops/image_ops.h"\n', "layer 'media' includes"),
    ("src/io/bad.cc", '#include "pipeline/impl.h"\n', "private to 'pipeline'"),
    ("include/feedline/media/bad.h", '#include "media/codecs.h"\n', "public header includes private"),
    ("src/pipeline/bad.cc", "#include <nanobind/nanobind.h>\n", "Python belongs"),
    ("include/feedline/base/bad.h", "#include <Python.h>\n", "Python belongs"),
    ("include/feedline/media/bad.h", "#include <libavformat/avformat.h>\n", "FFmpeg header"),
    ("src/io/bad.cc", "#include <turbojpeg.h>\n", "libjpeg-turbo header"),
    ("src/pipeline/bad.cc", "#include <png.h>\n", "libpng header"),
    ("src/ops/bad.cc", "#include <zlib.h>\n", "zlib header"),
    ("src/io/bad.cc", "#include <zlib.h>\n", "zlib header zlib.h: not used in any layer"),
    ("src/pipeline/bad.cc", "#include <libdeflate.h>\n", "libdeflate header"),
    ("src/pipeline/bad.cc", '#include "nowhere.h"\n', "no file of include/ or src/"),
    ("src/gpu/bad.cc", "#include <vector>\n", "unknown layer 'gpu'"),
]


def make_tree(root, files):
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def run_check(root):
    return subprocess.run([sys.executable, str(CHECK), str(root)], capture_output=True, text=True)


def test_a_tree_that_keeps_its_layers_passes(tmp_path):
    make_tree(tmp_path, GOOD)
    result = run_check(tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout == ""


@pytest.mark.parametrize(("path", "text", "message"), BAD, ids=[f"{p}:{t.strip()}" for p, t, _ in BAD])
def test_an_include_that_crosses_a_layer_fails(tmp_path, path, text, message):
    make_tree(tmp_path, GOOD)
    make_tree(tmp_path, {path: "// SPDX-License-Identifier: Apache-2.0\n" + text})
    result = run_check(tmp_path)
    assert result.returncode == 1
    assert result.stdout.startswith(f"{path}:2: ") or path.startswith("src/gpu"), result.stdout
    assert message in result.stdout


def test_this_repository_keeps_its_layers():
    result = run_check(ROOT)
    assert result.returncode == 0, result.stdout
