#!/usr/bin/env python3
"""Plots what `api-bench` measured: latency by percentile for each scenario
(left) and throughput (right), into one PNG for BENCHMARKS.md.

Usage: python3 bench/plot-api.py [RESULTS_DIR] [OUTPUT_PNG]
       (defaults: bench-results, RESULTS_DIR/latency.png)
Needs matplotlib (pip install matplotlib).
"""

import csv
import math
import sys
from collections import defaultdict
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only: no display on servers and CI machines
import matplotlib.pyplot as plt  # noqa: E402 (the backend must be chosen first)
from matplotlib.ticker import FixedLocator, FuncFormatter  # noqa: E402


def read_rows(path):
    with open(path, newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def tail_position(percentile):
    """Maps a percentile onto an axis that spreads the tail: 90 -> 1, 99 -> 2, 99.9 -> 3."""
    remaining = max(100.0 - percentile, 1e-4)
    return math.log10(100.0 / remaining)


def main():
    results = Path(sys.argv[1]) if len(sys.argv) > 1 else Path("bench-results")
    output = Path(sys.argv[2]) if len(sys.argv) > 2 else results / "latency.png"
    curves = defaultdict(list)
    for row in read_rows(results / "latency.csv"):
        curves[row["scenario"]].append((float(row["percentile"]), float(row["latency_ms"])))
    summary = read_rows(results / "summary.csv")

    figure, (latency_axis, throughput_axis) = plt.subplots(
        1, 2, figsize=(13, 5), gridspec_kw={"width_ratios": [2, 1]}
    )
    for scenario, points in curves.items():
        xs = [tail_position(percentile) for percentile, _ in points]
        ys = [latency for _, latency in points]
        latency_axis.plot(xs, ys, label=scenario, linewidth=1.6)
    ticks = [0, 50, 90, 99, 99.9, 99.99, 99.999]
    latency_axis.xaxis.set_major_locator(FixedLocator([tail_position(p) for p in ticks]))
    latency_axis.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{100 - 100 / 10 ** x:g}"))
    latency_axis.set_yscale("log")
    latency_axis.set_xlabel("percentile")
    latency_axis.set_ylabel("latency (ms, log scale)")
    connections = summary[0]["connections"] if summary else "?"
    latency_axis.set_title(f"Latency by percentile, {connections} connections")
    latency_axis.grid(True, which="both", alpha=0.3)
    latency_axis.legend()

    names = [row["scenario"] for row in summary]
    rates = [float(row["throughput_rps"]) for row in summary]
    bars = throughput_axis.bar(names, rates, color="tab:blue")
    throughput_axis.bar_label(bars, labels=[f"{rate:,.0f}" for rate in rates], fontsize=8)
    throughput_axis.set_ylabel("requests per second")
    throughput_axis.set_title("Throughput")
    throughput_axis.tick_params(axis="x", rotation=20)

    figure.tight_layout()
    figure.savefig(output, dpi=110)
    print(f"wrote {output}")


if __name__ == "__main__":
    main()
