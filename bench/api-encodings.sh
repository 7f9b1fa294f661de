#!/usr/bin/env bash
# What a browser's Accept-Encoding costs the cached and uncached reads, and
# how near the cached read runs to the floor (BENCHMARKS.md, "Compression"):
# api-bench runs every scenario four times in a row, without a browser's
# Accept-Encoding, with it, with it, without it (A B B A), so drift on this
# noisy machine falls on both alike, beside the anchor (axum answering a
# ranked answer's bytes and nothing else). Each ratio is the mean of the B
# runs over the mean of the A runs; every run is printed. It also prints the
# bytes a ranked answer takes on the wire in each coding.
#
#   bench/api-encodings.sh [TABLE_PREFIX] [SECONDS]
#
# TABLE_PREFIX: the data set (default bench_, loaded by bench/load.sh and
# ranked; demo_ tables from `reviews-admin demo load --table-prefix demo_`
# work too). SECONDS: measured seconds per run (default 10, after 6 s of
# warm-up). Writes bench/out/api-encodings/{summary,latency}.csv and
# wire-bytes.txt. A run takes about 7 scenarios x 4 x (SECONDS + 6) s.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/lib.sh
prefix=${1:-bench_}
seconds=${2:-10}
out=bench/out/api-encodings
build_release_binaries
mkdir -p "$out"
target/release/api-bench --table-prefix "$prefix" --pool-size 32 --connections 32 \
  --duration-secs "$seconds" --warmup-secs 6 --out-dir "$out" \
  --scenarios ranked-cached,summary-cached,reviews-html-cached,script,anchor,ranked-uncached,summary-uncached \
  --encodings identity,browser,browser,identity | tee "$out/bench.log"

# The bytes on the wire of one ranked answer, the hottest product's, in each
# coding, from a service with its cache on.
port=18097
start_query_api "$port" "$out/wire-service.log" --table-prefix "$prefix"
trap 'kill -TERM "$api_pid" 2>/dev/null || true' EXIT
url="http://127.0.0.1:$port/v1/products/P000000001/comments/ranked"
curl -sf "$url" >/dev/null # loads and caches the ranking
{
  for coding in identity gzip br; do
    bytes=$(curl -sf -H "Accept-Encoding: $coding" "$url" | wc -c)
    echo "ranked answer, $coding: $bytes bytes"
  done
} | tee "$out/wire-bytes.txt"
