# SPDX-License-Identifier: Apache-2.0
"""The tables of bench/python/video.py: frames/s per configuration, ratios
against each baseline's best configuration, and the goals. See video.py
for what is measured and how."""

from __future__ import annotations

from video_parts import RESIZE, WINDOW_FRAMES

# "limit" is video_limit, the bounds (not a baseline).
LIBS = {"feedline": "feedline", "pyav": "PyAV", "spdl": "SPDL", "torchcodec": "torchcodec", "limit": "limit"}
BASELINES = ("pyav", "spdl", "torchcodec")
# feedline with its default settings over the best baseline, per scenario.
GOALS = {"whole": 1.1, "window": 1.5, "resize": 1.3}


def _fmt(x, fmt):
    return "-" if x is None else format(x, fmt)


def _ratio(x, base):
    return "n/a" if x is None or base is None else f"{x / base:.2f}x"


def _best_rates(results):
    """{lib: (best frames/s, config)} over the configurations that ran ok."""
    best = {}
    for r in results:
        if r.ok and (r.config.lib not in best or r.frames_per_s > best[r.config.lib][0]):
            best[r.config.lib] = (r.frames_per_s, r.config)
    return best


def _best_baseline(best):
    candidates = [(rate, cfg) for lib, (rate, cfg) in best.items() if lib in BASELINES]
    return max(candidates, key=lambda c: c[0]) if candidates else (None, None)


def print_table(scenario, results, items):
    best = _best_rates(results)
    top_rate, _ = _best_baseline(best)
    baselines_run = [lib for lib in BASELINES if any(r.config.lib == lib for r in results)]
    header = ["contender", "configuration", "frames/s"]
    header += [f"vs {LIBS[lib]}" for lib in baselines_run]
    header += ["vs best baseline", "CPU ms/frame", "peak RSS MiB", "frames ok"]
    rows = []
    for r in results:
        lead = [LIBS[r.config.lib], r.config.name.split("/")[1] + ": " + r.config.label]
        if r.skipped:
            rows.append([*lead, *["-"] * (len(header) - 3), f"n/a: {r.note}"])
            continue
        rate = r.frames_per_s if r.ok else None
        cells = [*lead, _fmt(r.frames_per_s, ",.1f")]
        cells += [_ratio(rate, best.get(lib, (None,))[0]) for lib in baselines_run]
        cells += [_ratio(rate, top_rate), _fmt(r.cpu_ms_per_frame, ".2f"), _fmt(r.peak_rss_mib, ",.0f")]
        cells.append("yes" if r.ok else f"NO: {r.note}")
        rows.append(cells)
    widths = [max(len(str(row[i])) for row in [header, *rows]) for i in range(len(header) - 1)]

    def line(cells):
        parts = [str(cells[0]).ljust(widths[0]), str(cells[1]).ljust(widths[1])]
        parts += [str(c).rjust(w) for c, w in zip(cells[2:-1], widths[2:])]
        return "  ".join([*parts, str(cells[-1])])

    frames = sum(i.expected for i in items)
    if scenario == "whole":
        title = f"Whole clips: {len(items)} clips, {frames} frames per pass"
    elif scenario == "resize":
        title = f"Whole clips decoded to {RESIZE}x{RESIZE}: {len(items)} clips, {frames} frames per pass"
    else:
        title = f"Windows of {WINDOW_FRAMES} frames at random t: {len(items)} samples, {frames} frames per pass"
    print(f"\n{title}")
    print(line(header))
    print("  ".join("-" * w for w in widths) + "  ---------")
    for row in rows:
        print(line(row))
    if best:
        print("Ratios: against each library's best configuration that ran here.")


def print_counts_agree(scenario, results, items):
    """Frame counts per item agree between contenders (each is also checked against the expected count)."""
    ran = [r for r in results if r.counts is not None]
    if len(ran) < 2:
        return
    reference = ran[0]
    differ = [r.config.name for r in ran[1:] if r.counts != reference.counts]
    if differ:
        print(f"  per-item frame counts differ from {reference.config.name}'s: {', '.join(differ)}")
    else:
        print(f"  per-item frame counts: identical across the {len(ran)} configurations that ran")


def print_gil(scenario, results):
    """threads vs processes with the same decoder settings: does the library release the GIL?"""
    by_name = {r.config.name: r for r in results if r.ok}
    lines = []
    for lib in LIBS:
        t, p = by_name.get(f"{lib}/threads"), by_name.get(f"{lib}/processes")
        if t and p:
            ratio = t.frames_per_s / p.frames_per_s
            if ratio >= 0.9:
                verdict = "threads do as well: the decode releases the GIL"
            else:
                verdict = "threads lose: the GIL is held for part of the work"
            rates = f"2 threads {t.frames_per_s:8.1f} vs 2 processes {p.frames_per_s:8.1f} frames/s"
            lines.append(f"  {LIBS[lib]:10} {rates}: {ratio:.2f}x  ({verdict})")
    if lines:
        print("Threads vs processes (same decoder settings):")
        print("\n".join(lines))


def default_ratio(results):
    """feedline with its default settings (feedline/threads) over the best
    baseline's best configuration, and that configuration; None if either is missing."""
    default = next((r for r in results if r.ok and r.config.name == "feedline/threads"), None)
    top_rate, top_cfg = _best_baseline(_best_rates(results))
    if default is None or top_rate is None:
        return None, top_cfg, top_rate
    return default.frames_per_s / top_rate, top_cfg, top_rate


def _bound_lines(scenario, results, top_rate):
    """feedline's defaults, the best baseline and the goal as shares of
    video_limit's two bounds (decode + convert, decode alone), as far as
    they ran."""
    by_name = {r.config.name: r for r in results if r.ok}
    default = by_name.get("feedline/threads")
    lines = []
    for name, what in (("limit/threads", "bare decode + sws_scale loop"), ("limit/threads-decode", "decoding alone")):
        bound = by_name.get(name)
        if bound is None:
            continue
        b = bound.frames_per_s
        shares = [] if default is None else [f"feedline {100 * default.frames_per_s / b:.0f}%"]
        if top_rate is not None:
            shares += [f"best baseline {100 * top_rate / b:.0f}%"]
            shares += [f"the goal would be {100 * GOALS[scenario] * top_rate / b:.0f}%"]
        lines.append(f"    {what} ({name}, {b:,.1f} frames/s): {', '.join(shares) or 'nothing else ran'}")
    return lines


def print_goals(all_results, quick):
    """Returns {scenario: ratio or None} of feedline's defaults over the best baseline."""
    lines, ratios = [], {}
    for scenario, results in all_results:
        ratio, top_cfg, top_rate = default_ratio(results)
        ratios[scenario] = ratio
        best = _best_rates(results).get("feedline")
        text = f"{scenario}: >= {GOALS[scenario]:g}x best baseline"
        if ratio is None:
            lines.append(f"  {text:34} n/a ({'no baseline' if top_rate is None else 'feedline defaults did not'} run)")
            lines += _bound_lines(scenario, results, top_rate)
            continue
        verdict = "met" if ratio >= GOALS[scenario] else "NOT met"
        top = f"best baseline: {top_cfg.name}, {top_rate:,.1f} frames/s"
        line = f"  {text:34} {ratio:5.2f}x with defaults  {verdict}  ({top})"
        if best is not None and best[1].name != "feedline/threads":
            line += f"; best feedline ({best[1].name}) {best[0] / top_rate:.2f}x"
        lines.append(line)
        lines += _bound_lines(scenario, results, top_rate)
    print("\nGoals for feedline" + (" -- smoke run, not meaningful:" if quick else ":"))
    print("\n".join(lines))
    return ratios
