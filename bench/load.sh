#!/usr/bin/env bash
# Loads a benchmark data set on the local HBase, seeded so every load is
# byte-identical; a second run recognises the data and writes nothing. The
# tables keyed by a random id are created pre-split into 8 regions (tables
# that exist keep theirs).
#
#   bench/load.sh           bench_:       1,000,000 comments over  10,000 products,
#                                         the hottest with at least 100,000
#   bench/load.sh --large   bench_large_: 2,000,000 comments over 100,000 products
#                                         (the incremental benchmark's catalog ten
#                                         times larger), the same hottest
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
case "${1:-}" in
  "") prefix=bench_ products=10000 comments=1000000 summary=bench-summary.json ;;
  --large) prefix=bench_large_ products=100000 comments=2000000 summary=bench-large-summary.json ;;
  *) echo "usage: bench/load.sh [--large]" >&2; exit 2 ;;
esac
mkdir -p bench/out
hbase/hbasectl start
cargo build --release --locked --bins
target/release/reviews-admin demo load --table-prefix "$prefix" --regions 8 \
  --users 100000 --sellers 500 --products "$products" --comments "$comments" \
  --hot-products 5 --hot-share 0.25 --min-hottest-comments 100000 --seed 42 \
  --batch-size 500 --in-flight 8 --summary-json "bench/out/$summary"
