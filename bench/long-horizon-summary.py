#!/usr/bin/env python3
"""Summarises runs of long-horizon benchmark adapters (the JSON lines bench/long-horizon.sh records) as a
Markdown table, one row per run.

Usage: bench/long-horizon-summary.py RUN.jsonl ...

The first and the last sample of a run are left out (the first covers the start, the last may be cut by the
stop). Per run: the mean and the median of the completion-rate samples, the lowest as a share of the median
(issue 25's bar is 70 %), and the claim p99 over the 30 s windows: its median and its worst as a multiple of the
median (the bar is 2x); n/a where the adapter reported no latency. Only the standard library is used.
"""

import json
import statistics
import sys
from pathlib import Path


def samples(path):
    """The run's samples, {tick: {metric: value}}, in tick order."""
    by_tick = {}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line.startswith("{"):
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue
            if record.get("kind") != "adapter" or "metric" not in record:
                continue
            by_tick.setdefault(record["t"], {})[record["metric"]] = record["value"]
    return [by_tick[t] for t in sorted(by_tick)]


def summary(path):
    ticks = samples(path)[1:-1]
    rates = [s["completion_rate"] for s in ticks if "completion_rate" in s]
    # A latency of 0 is an adapter's empty window (awa's, when every claim took longer than its histogram holds).
    p99s = [s["claim_p99_ms"] for s in ticks if s.get("claim_p99_ms", 0) > 0]
    p50s = [s["claim_p50_ms"] for s in ticks if s.get("claim_p50_ms", 0) > 0]
    if not rates:
        return None
    median = statistics.median(rates)
    p99_median = statistics.median(p99s) if p99s else float("nan")
    return {
        "run": Path(path).stem,
        "samples": len(rates),
        "mean": statistics.fmean(rates),
        "median": median,
        "lowest_share": min(rates) / median if median > 0 else 0.0,
        "p50": statistics.median(p50s) if p50s else float("nan"),
        "p99": p99_median,
        "worst_p99": max(p99s) / p99_median if p99s and p99_median > 0 else float("nan"),
    }


def main(paths):
    rows = [s for s in (summary(p) for p in paths) if s]
    if not rows:
        print("no samples found", file=sys.stderr)
        return 1
    print("| run | samples | jobs/s (mean) | median | lowest / median | claim p50 | claim p99 | worst p99 / median |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    def ms(v):
        return "n/a" if v != v else f"{v:.1f} ms"

    for r in sorted(rows, key=lambda r: r["run"]):
        worst = "n/a" if r["worst_p99"] != r["worst_p99"] else f"{r['worst_p99']:.2f}x"
        print(
            f"| {r['run']} | {r['samples']} | {r['mean']:,.0f} | {r['median']:,.0f} | {r['lowest_share']:.0%} "
            f"| {ms(r['p50'])} | {ms(r['p99'])} | {worst} |"
        )
    return 0


if __name__ == "__main__":
    if len(sys.argv) < 2:
        print(__doc__.strip(), file=sys.stderr)
        sys.exit(2)
    sys.exit(main(sys.argv[1:]))
