# SPDX-License-Identifier: Apache-2.0
"""The tables of bench/python/images.py: images/s, ratios against each
baseline, CPU per image and peak memory per contender, and the goals of the
centre-crop and augmentation runs. See images.py for what is measured and
how."""

from __future__ import annotations

import dataclasses
import importlib.metadata
import statistics
from typing import Any


@dataclasses.dataclass
class Result:
    contender: Any  # images.Contender
    images_per_s: float | None = None
    cpu_ms_per_image: float | None = None
    peak_rss_mib: float | None = None
    items_ok: bool = False
    note: str = ""  # why items_ok is False, or why there are no numbers
    skipped: bool = False  # not installed / not built: not a failure


def fill_result(result, report, n):
    """Turns a worker's JSON report into medians and an images-ok verdict."""
    if "unavailable" in report:
        result.skipped = True
        result.note = report["unavailable"]
        return
    runs = report["runs"]
    result.images_per_s = statistics.median(n / r["wall_s"] for r in runs)
    result.cpu_ms_per_image = statistics.median(r["cpu_s"] / n * 1e3 for r in runs)
    result.peak_rss_mib = report["peak_rss_kib"] / 1024
    wrong = [r for r in runs if r["count"] != n or r.get("bad_batches") or r.get("failed")]
    if wrong:
        r = wrong[0]
        result.note = f"got {r['count']} of {n}"
        if r.get("bad_batches"):
            result.note += f", {r['bad_batches']} malformed batches"
        if r.get("failed"):
            result.note += f", {r['failed']} failed"
    result.items_ok = not result.note


def _fmt_ratio(x, base):
    if x is None or base is None:
        return "n/a"
    return f"{x / base:.2f}x"


def _fmt(x, fmt):
    return "-" if x is None else format(x, fmt)


def _ok_rate(result):
    return result.images_per_s if result and result.items_ok else None


def _ok_cpu(result):
    return result.cpu_ms_per_image if result and result.items_ok else None


def _table_rows(results, by_name, baselines):
    dl, sp, lim = (by_name.get(n) for n in baselines)
    dl_rate, sp_rate, lim_rate = _ok_rate(dl), _ok_rate(sp), _ok_rate(lim)
    rows = []
    for r in results:
        if r.skipped:
            rows.append((r.contender.label, *["-"] * 7, f"n/a: {r.note}"))
            continue
        frac = None if lim_rate is None or r.images_per_s is None else 100 * r.images_per_s / lim_rate
        rows.append(
            (
                r.contender.label,
                _fmt(r.images_per_s, ",.0f"),
                _fmt_ratio(r.images_per_s, dl_rate),
                _fmt_ratio(r.images_per_s, sp_rate),
                _fmt(frac, ".0f"),
                _fmt(r.cpu_ms_per_image, ".2f"),
                _fmt_ratio(r.cpu_ms_per_image, _ok_cpu(dl)),
                _fmt(r.peak_rss_mib, ".0f"),
                "yes" if r.items_ok else f"NO: {r.note}",
            )
        )
    return rows


def print_table(results, baselines=("dataloader", "spdl", "limit")):
    if not results:
        return
    by_name = {r.contender.name: r for r in results}
    header = (
        "contender",
        "images/s",
        "vs DataLoader",
        "vs SPDL",
        "% of limit",
        "CPU ms/image",
        "CPU vs DataLoader",
        "peak RSS MiB",
        "images ok",
    )
    rows = _table_rows(results, by_name, baselines)
    widths = [max(len(str(row[i])) for row in [header, *rows]) for i in range(len(header) - 1)]

    def line(cells):
        # Label left, numbers right, the verdict free-form at the end.
        parts = [str(cells[0]).ljust(widths[0])]
        parts += [str(c).rjust(w) for c, w in zip(cells[1:-1], widths[1:])]
        return "  ".join([*parts, str(cells[-1])])

    print()
    print(line(header))
    print("  ".join("-" * w for w in widths) + "  ---------")
    for row in rows:
        print(line(row))


def print_goals(results, quick):
    by_name = {r.contender.name: r for r in results}
    fl = by_name.get("feedline")
    if fl is None or not fl.items_ok:
        return
    dl, sp, lim = (by_name.get(n) for n in ("dataloader", "spdl", "limit"))
    goals = [
        (">= 4x DataLoader images/s", fl.images_per_s, _ok_rate(dl), 4.0, "x"),
        (">= 2.5x SPDL images/s", fl.images_per_s, _ok_rate(sp), 2.5, "x"),
        (">= 85% of the limit", fl.images_per_s, _ok_rate(lim), 0.85, "%"),
    ]
    print("\nGoals for feedline (native ops)" + (" -- smoke run, not meaningful:" if quick else ":"))
    for text, value, base, target, unit in goals:
        if base is None:
            print(f"  {text:32} n/a")
            continue
        ratio = value / base
        shown = f"{ratio * 100:.0f}%" if unit == "%" else f"{ratio:.2f}x"
        print(f"  {text:32} {shown:>7}  {'met' if ratio >= target else 'NOT met'}")
    dl_cpu = _ok_cpu(dl)
    if dl_cpu is None:
        print(f"  {'CPU/image <= 0.5x DataLoader':32} n/a")
    else:
        ratio = fl.cpu_ms_per_image / dl_cpu
        print(f"  {'CPU/image <= 0.5x DataLoader':32} {ratio:>6.2f}x  {'met' if ratio <= 0.5 else 'NOT met'}")


PREPARED_NA = "  prepared/DataLoader n/a  prepared/full-decode n/a"


def print_rrc_goals(results, quick):
    """The augmentation table's goals, and the run's one-line summary."""
    by_name = {r.contender.name: r for r in results}
    rrc, no_partial, full, dl = (
        by_name.get(n) for n in ("rrc-feedline", "rrc-no-partial", "rrc-full-decode", "rrc-dataloader")
    )
    if rrc is None or not rrc.items_ok:
        # The summary line still ends the run, so that runs can be compared.
        print(f"\nRRC feedline/DataLoader n/a  feedline RRC/full-decode n/a{PREPARED_NA}")
        return
    print("\nGoals for feedline RRC" + (" -- smoke run, not meaningful:" if quick else ":"))
    goals = [
        (">= 1.5x feedline full-decode", _ok_rate(full), 1.5),
        (">= 5x DataLoader images/s", _ok_rate(dl), 5.0),
    ]
    for text, base, target in goals:
        ratio = None if base is None else rrc.images_per_s / base
        verdict = "n/a" if ratio is None else f"{ratio:>6.2f}x  {'met' if ratio >= target else 'NOT met'}"
        print(f"  {text:32} {verdict}")
    dl_cpu = _ok_cpu(dl)
    cpu_ratio = None if dl_cpu is None else rrc.cpu_ms_per_image / dl_cpu
    verdict = "n/a" if cpu_ratio is None else f"{cpu_ratio:>6.2f}x  {'met' if cpu_ratio <= 0.2 else 'NOT met'}"
    print(f"  {'CPU/image <= 0.2x DataLoader':32} {verdict}")
    np_cpu = _ok_cpu(no_partial)
    if np_cpu is not None:
        saved = 1 - rrc.cpu_ms_per_image / np_cpu
        print(
            f"  partial decoding saves {100 * saved:.0f}% of the CPU time of decoding the whole image at the same scale"
        )
    limit = _ok_rate(by_name.get("rrc-limit"))
    if limit is not None:
        print(f"  feedline RRC runs at {100 * rrc.images_per_s / limit:.0f}% of the bare RRC decode loop (rrc-limit)")
    prepared = _print_prepared_goals(by_name, full, dl)
    dl_ratio = "n/a" if _ok_rate(dl) is None else f"{rrc.images_per_s / _ok_rate(dl):.2f}"
    full_ratio = "n/a" if _ok_rate(full) is None else f"{rrc.images_per_s / _ok_rate(full):.2f}"
    print(f"\nRRC feedline/DataLoader {dl_ratio}  feedline RRC/full-decode {full_ratio}{prepared}")


def _print_prepared_goals(by_name, full, dl):
    """The same goals for feedline RRC on prepare_jpeg() copies; returns the
    summary line's tail ('' when that contender did not run)."""
    rrc = by_name.get("rrc-prepared")
    if rrc is None or not rrc.items_ok:
        return PREPARED_NA
    print("Goals for feedline RRC on prepared JPEGs (against the other contenders on the original files):")
    ratios = {}
    for key, text, base, target in (
        ("full", ">= 1.5x feedline full-decode", _ok_rate(full), 1.5),
        ("dl", ">= 5x DataLoader images/s", _ok_rate(dl), 5.0),
    ):
        ratios[key] = None if base is None else rrc.images_per_s / base
        verdict = (
            "n/a" if ratios[key] is None else f"{ratios[key]:>6.2f}x  {'met' if ratios[key] >= target else 'NOT met'}"
        )
        print(f"  {text:32} {verdict}")
    dl_cpu = _ok_cpu(dl)
    cpu_ratio = None if dl_cpu is None else rrc.cpu_ms_per_image / dl_cpu
    verdict = "n/a" if cpu_ratio is None else f"{cpu_ratio:>6.2f}x  {'met' if cpu_ratio <= 0.2 else 'NOT met'}"
    print(f"  {'CPU/image <= 0.2x DataLoader':32} {verdict}")
    plain = by_name.get("rrc-feedline")
    if plain is not None and plain.items_ok:
        saved = 1 - rrc.cpu_ms_per_image / plain.cpu_ms_per_image
        print(f"  decoding only the restart intervals a crop covers saves {100 * saved:.0f}% of the CPU per image")
    dl_prepared = _ok_rate(by_name.get("rrc-dataloader-prepared"))
    if dl_prepared is not None:
        print(f"  against the DataLoader on the same prepared files: {rrc.images_per_s / dl_prepared:.2f}x")
    limit = _ok_rate(by_name.get("rrc-limit-prepared"))
    if limit is not None:
        print(
            f"  it runs at {100 * rrc.images_per_s / limit:.0f}% of the bare loop on prepared files (rrc-limit-prepared)"
        )
    fmt = {k: "n/a" if v is None else f"{v:.2f}" for k, v in ratios.items()}
    return f"  prepared/DataLoader {fmt['dl']}  prepared/full-decode {fmt['full']}"


def dist_version(dist):
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"
