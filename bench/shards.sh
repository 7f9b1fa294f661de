#!/usr/bin/env bash
# The shard balance table (BENCHMARKS.md, "Shard balance"): for the data set
# under table prefix PREFIX ("" for the demo's tables, bench_ for bench/load.sh's),
# shows the plan `ranker run --shard i/N` would use (`ranker shards --count N`:
# regions, what the count found and the time it took), then counts what each
# shard actually holds with a read pass over its range
# (`ranker bench-read --shard i/N`: every product and comment in it) and
# prints each shard's share of products and of comments and the largest over
# the mean. Writes nothing. The data must not change while it runs: each read
# pass uses today's stored plan (`day-<UTC date>`) if a shard run stored one,
# and otherwise computes it afresh (a read pass stores no plan), and on
# unchanged data every computation gives the same plan; the table printed
# first is always computed afresh, so run it where no shard run of the same
# count stored a plan today.
#
# Usage: bench/shards.sh PREFIX [N]   (BIN_DIR=target/debug to use a debug build)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/lib.sh
prefix=${1?usage: bench/shards.sh PREFIX [N]}
count=${2:-8}
BIN=${BIN_DIR:-$BIN}
if [ "$BIN" = target/release ]; then
  cargo build --release --locked -p ranker --bin ranker
fi
out=bench/out/shards-${prefix:-demo}-$count
mkdir -p "$out"
/usr/bin/time -f "%e s wall, %M KiB peak RSS" "$BIN/ranker" shards --count "$count" --table-prefix "$prefix" \
  --json >"$out/plan.json" 2>"$out/plan.err"
for index in $(seq 0 $((count - 1))); do
  "$BIN/ranker" bench-read --shard "$index/$count" --table-prefix "$prefix" --json \
    >"$out/shard-$index.json" 2>"$out/shard-$index.err"
done
python3 - "$out" "$count" <<'PY'
import json, sys
out, count = sys.argv[1], int(sys.argv[2])
plan = json.load(open(f"{out}/plan.json"))
timing = open(f"{out}/plan.err").read().strip().splitlines()[-1]
print(f"plan: {plan['regions']} region(s), counted {plan['countedProducts']:,} products and "
      f"{plan['countedComments']:,} comments read in {plan['countMs'] / 1000:.2f} s (`ranker shards`: {timing})")
shards = [json.load(open(f"{out}/shard-{index}.json")) for index in range(count)]
products = [shard["products_ranked"] for shard in shards]
comments = [shard["comments_scored"] for shard in shards]
print("| shard | start | products | share | comments | share |")
print("|---:|---|---:|---:|---:|---:|")
for index in range(count):
    start = plan["shards"][index]["start"] or "(start)"
    print(f"| {index} | `{start}` | {products[index]:,} | {products[index] / sum(products):.1%} "
          f"| {comments[index]:,} | {comments[index] / sum(comments):.1%} |")
mean_products, mean_comments = sum(products) / count, sum(comments) / count
print(f"| all | | {sum(products):,} | max/mean {max(products) / mean_products:.2f} "
      f"| {sum(comments):,} | max/mean {max(comments) / mean_comments:.2f} |")
PY
