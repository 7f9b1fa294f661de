#!/usr/bin/env bash
# The query-api benchmark (BENCHMARKS.md): 32 connections, 30 s per scenario,
# each without and with a browser's Accept-Encoding,
# on the bench_ data set after bench/ranker.sh has ranked it. Writes
# bench/out/api/{summary,latency}.csv and the plot bench/api-latency.png
# (with matplotlib, which scripts/lib.sh's plot_python installs into
# target/plot-venv on first use; without it the figures stand and the plot is
# skipped with a one-line message).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/lib.sh
build_release_binaries
target/release/api-bench --table-prefix bench_ --pool-size 32 --connections 32 \
  --duration-secs 30 --warmup-secs 5 --out-dir bench/out/api --encodings identity,browser
if python="$(plot_python)"; then
  "$python" bench/plot-api.py bench/out/api bench/api-latency.png
fi
