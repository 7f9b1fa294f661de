#!/usr/bin/env bash
# The query-api benchmark (BENCHMARKS.md): 32 connections, 30 s per scenario,
# on the bench_ data set after bench/ranker.sh has ranked it. Writes
# bench/out/api/{summary,latency}.csv and the plot bench/api-latency.png
# (plotting needs matplotlib: pip install matplotlib).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/lib.sh
build_release_binaries
target/release/api-bench --table-prefix bench_ --pool-size 32 --connections 32 \
  --duration-secs 30 --warmup-secs 5 --out-dir bench/out/api
python3 bench/plot-api.py bench/out/api bench/api-latency.png
