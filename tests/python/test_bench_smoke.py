"""Smoke runs of the Python benchmarks: they still work (numbers not read)."""

import importlib.util
import pathlib
import re
import subprocess
import sys

BENCH = pathlib.Path(__file__).resolve().parents[2] / "bench" / "python"


def run_bench(script, *args, timeout=600):
    """Runs bench/python/`script` with `args`; its stdout, once it exited 0."""
    r = subprocess.run([sys.executable, str(BENCH / script), *args], capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


def test_pipeline_overhead_benchmark_runs():
    # SPDL is a baseline, installed only by `install_deps.sh --bench`; the
    # feedline contenders must run and deliver every item without it.
    out = run_bench(
        "pipeline_overhead.py", "--quick", "--only", "loop,feedline-py,feedline-native,feedline-native-src", timeout=300
    )
    assert "feedline, native ops" in out


def test_images_benchmark_runs():
    # The baselines (torch, SPDL) are optional here; feedline's contenders and
    # the C++ limit (built with the release tree, when present) must run.
    only = "feedline,feedline-per-image,limit,rrc-feedline,rrc-full-decode,rrc-limit,rrc-prepared,rrc-limit-prepared"
    out = run_bench("images.py", "--quick", "--only", only)
    assert "feedline, native ops" in out
    # The augmentation contenders and the run's last line.
    assert "RRC feedline, native (partial decode)" in out
    # The augmentation table's limit: image_limit --rrc, when it is built.
    limit_bin = BENCH.parents[1] / "build" / "release" / "bench" / "cpp" / "image_limit"
    rrc_limit = next(line for line in out.splitlines() if line.startswith("RRC limit: bare decode loop"))
    if limit_bin.exists():
        assert rrc_limit.endswith("  yes"), out
    # Every contender hands out torch tensors: without torch (CI installs no
    # benchmark baselines) none can run, and the line says n/a.
    number = r"\d+\.\d\d" if importlib.util.find_spec("torch") else "n/a"
    # The same on prepare_jpeg() copies of the images.
    assert "Prepared copies (feedline.io.prepare_jpeg" in out
    summary = rf"^RRC feedline/DataLoader \S+  feedline RRC/full-decode {number}"
    summary += rf"  prepared/DataLoader \S+  prepared/full-decode {number}$"
    assert re.search(summary, out, re.M), out


def test_arena_handoff_benchmark_runs():
    # mp.Queue and feedline's pool and ring always run; SPDL's are optional.
    out = run_bench("arena_handoff.py", "--quick", "--sizes", "1")
    row = next(line for line in out.splitlines() if line.split()[:2] == ["1", "8"])
    assert row.count("GB/s") >= 3, out
    assert out.splitlines()[-1].startswith("SUMMARY: feedline pool vs mp.Queue"), out


def test_arrays_benchmark_runs():
    # numpy, wave and tarfile are always there; SPDL and soundfile are optional.
    out = run_bench("arrays.py", "--quick")
    assert "feedline.io.iter_tarfile" in out
    assert "feedline.io.iter_tarfile(f)" in out


def test_video_benchmark_runs():
    # The clips are made with the ffmpeg CLI (libx264); PyAV, SPDL and
    # torchcodec are optional baselines. feedline must run and deliver every
    # frame, in each of its configurations and the three frame scenarios, and
    # demux every packet of every file, with and without the stream probe.
    # The bounds (video_limit, built with the release tree) too, when built.
    out = run_bench("video.py", "--quick", "--only", "feedline,pyav,limit")
    assert "Whole clips:" in out and "Windows of 8 frames" in out and "decoded to 224x224" in out, out
    lines = out.splitlines()
    rows = [line for line in lines if line.startswith("feedline ") and ": 2 threads" in line]
    assert len(rows) == 6 and all(row.endswith("yes") for row in rows), out
    limits = [line for line in lines if line.startswith("limit ") and "bare C++ loop" in line]
    assert len(limits) == 4, out  # decode + convert and decode alone, whole and resize
    if (BENCH.parents[1] / "build" / "release" / "bench" / "cpp" / "video_limit").exists():
        assert all(line.endswith("yes") for line in limits), out
        assert out.count("decoding alone (limit/threads-decode,") == 2, out
    demux = [line for line in lines if line.startswith("feedline") and "demux_video" in line]
    assert len(demux) == 2 and all(" yes " in line for line in demux), out
    assert lines[-1].startswith("SUMMARY: video") and lines[-1].endswith("ok (smoke run)"), out


def test_dataloader_benchmark_runs(tmp_path):
    # torch (the baseline and the adapter contenders) is optional; the
    # feedline DataLoader must run and report its state_dict() cost.
    out = run_bench("dataloader.py", "--quick", "--data", str(tmp_path))
    assert "SUMMARY:" in out


def test_processes_benchmark_runs():
    # The feedline contenders (threads, a region, a subprocess) must deliver
    # every item (the script exits 1 otherwise); torch is optional.
    out = run_bench("processes.py", "--quick", "--only", "threads,region,subprocess,region-1m")
    assert "SUMMARY: region vs threads" in out


def test_autotune_benchmark_runs():
    # Numbers are not read (a smoke run is too short to converge); every item
    # must arrive and the CPU budget must hold (else it exits 1).
    out = run_bench("autotune.py", "--quick", "--only", "io,cpu", timeout=300)
    assert "summary: autotune reached" in out


def test_encode_benchmark_runs():
    # PyAV and Pillow are optional baselines; feedline's contenders must run,
    # pass their output checks and give the summary line.
    out = run_bench("encode.py", "--quick", "--only", "feedline-h264,feedline-png")
    assert re.search(r"\| feedline \(Muxer \+ libx264\) \| [\d.,]+ \| .* \| ok \|", out), out
    assert "ENCODE h264 feedline/PyAV" in out


def test_png_benchmark_runs():
    # Pillow and SPDL are optional baselines; feedline must decode every file
    # to its photograph exactly and give the summary line.
    out = run_bench("png.py", "--quick", "--only", "feedline", timeout=300)
    assert re.search(r"\| feedline \(decode_image\) \| [\d,]+ \| .* \| ok \|", out), out
    assert "PNG decode feedline/Pillow" in out
