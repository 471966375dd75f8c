"""docs/stats.md stays true for Python: its Python blocks run as written, in
order, against a real pipeline, and its table of Python attributes names
exactly what the statistics classes have."""

import json
import pathlib
import re

import pytest

import feedline.pipeline as fp

STATS_MD = pathlib.Path(__file__).resolve().parents[2] / "docs" / "stats.md"


def doc():
    return STATS_MD.read_text(encoding="utf-8")


def python_blocks(text):
    return re.findall(r"^```python\n(.*?)^```$", text, flags=re.MULTILINE | re.DOTALL)


def section(text, heading):
    start = text.index(f"\n{heading}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end >= 0 else len(text)]


def test_the_python_recipes_run_as_written(tmp_path, monkeypatch, capsys):
    blocks = python_blocks(doc())
    assert len(blocks) >= 5, "docs/stats.md lost its Python recipes"
    monkeypatch.chdir(tmp_path)  # the JSON recipe writes stats.jsonl here
    namespace = {"__name__": "docs_stats"}
    for i, block in enumerate(blocks):
        code = compile(block, f"docs/stats.md python block {i + 1}", "exec")
        exec(code, namespace)  # noqa: S102 (the documentation's own code)
    out = capsys.readouterr().out
    # The recipes read a real run: the table, every stage, the JSON report.
    stats = namespace["stats"]
    assert isinstance(stats, fp.PipelineStats) and stats.items_delivered == 7
    assert "pipeline" in out and "1:read[4]" in out and "2:decode[2]" in out
    assert namespace["bottleneck"].kind == "pipe"
    verdict = namespace["verdict"]
    assert (verdict.kind, verdict.stage_name) == ("stage", "2:decode[2]"), verdict
    report = namespace["report"]
    assert [s["name"] for s in report["stages"]] == [s.name for s in stats.stages]
    assert (tmp_path / "stats.jsonl").exists()


def test_the_python_attribute_table_matches_the_classes():
    rows = [
        line
        for line in section(doc(), "## In Python").splitlines()
        if line.startswith("| `") and not line.startswith("| Class")
    ]
    documented = {}
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        name = cells[0].strip("`")
        documented[name] = set(re.findall(r"`(\w+)(?:\([^)]*\))?`", cells[1]))
    assert set(documented) == {
        "PipelineStats",
        "Bottleneck",
        "RegionStats",
        "StageStats",
        "QueueStats",
        "LatencyHistogram",
        "AutotuneStats",
        "AutotuneDecision",
    }
    for name, attrs in documented.items():
        public = {a for a in dir(getattr(fp, name)) if not a.startswith("_")}
        assert attrs == public, f"{name}: the doc lists {sorted(attrs)}, the class has {sorted(public)}"


@pytest.fixture(scope="module")
def finished_stats():
    p = fp.PipelineBuilder().add_source(range(10)).pipe(lambda x: x).add_sink(3).build(num_threads=1)
    with p.auto_stop():
        assert list(p) == list(range(10))
    return p.stats()


def test_json_durations_are_seconds_as_documented(finished_stats):
    stats = finished_stats
    record = json.loads(stats.to_json())
    assert record["elapsed_s"] == pytest.approx(stats.elapsed, rel=1e-6)
    for got, stage in zip(record["stages"], stats.stages):
        assert got["op_time_total_s"] == pytest.approx(stage.op_time.total, rel=1e-6, abs=1e-9)
        assert got["wait_input_s"] == pytest.approx(stage.wait_input, rel=1e-6, abs=1e-9)
    for doc_string in (fp.PipelineStats.to_json.__doc__, fp.JsonLinesWriter.__doc__):
        assert "seconds" in doc_string and "nanoseconds" not in doc_string and "in ns" not in doc_string


def test_default_queue_capacities_are_the_documented_ones(finished_stats):
    # docs/stats.md, QueueStats: output_capacity defaults to 16 (2 after an
    # aggregate), plus the producer's concurrency; the sink's is add_sink's.
    caps = [s.input_queue.capacity for s in finished_stats.stages]
    assert caps == [0, 16 + 1, 3 + 1]
    assert "default 16, or 2 after an aggregate" in section(doc(), "## QueueStats")
    p = fp.PipelineBuilder().add_source(range(4)).aggregate(2).pipe(len).add_sink(3).build(num_threads=1)
    with p.auto_stop():
        assert list(p) == [2, 2]
    assert [s.input_queue.capacity for s in p.stats().stages] == [0, 17, 2 + 1, 3 + 1]
