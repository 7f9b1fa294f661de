#!/usr/bin/env bash
# Loads the benchmark data set under the table prefix bench_ on the local
# HBase: 1,000,000 comments over 10,000 products, the hottest with at least
# 100,000, seeded so every load is byte-identical. Run once; a second run
# recognises the data and writes nothing. The tables keyed by a random id are
# created pre-split into 8 regions (tables that exist keep theirs).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
mkdir -p bench/out
hbase/hbasectl start
cargo build --release --locked --bins
target/release/reviews-admin demo load --table-prefix bench_ --regions 8 \
  --users 100000 --sellers 500 --products 10000 --comments 1000000 \
  --hot-products 5 --hot-share 0.25 --min-hottest-comments 100000 --seed 42 \
  --batch-size 500 --in-flight 8 --summary-json bench/out/bench-summary.json
