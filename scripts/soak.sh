#!/usr/bin/env bash
# Soak test of the query service (issue 6, "Load and soak"): loads the demo
# data under its own table prefix, ranks it, starts the release `query-api`
# against it, and holds it at a fixed rate of mixed routes (v1 and seed pages,
# next pages from real cursors, user timelines, ranked reads) for ten minutes.
# `soak` (bench/src/bin/soak.rs) prints, per minute, the requests, status
# classes, p50/p99/max latency and the service's RSS, and fails on any 5xx, any
# request without an answer, a rate it could not hold, or an RSS at the end
# more than 10 % away from the RSS after the first minute.
#
# Usage: scripts/soak.sh [soak flags...]
#   scripts/soak.sh                          # measure the peak rate (20 s), soak 10 min at 50 % of it
#   scripts/soak.sh --rate 300               # soak at 300 req/s
#   scripts/soak.sh --duration-secs 180      # a shorter run
#   target/release/soak --help               # every flag
#
# Environment: REVIEWS_THRIFT_ADDR (default 127.0.0.1:9090), SOAK_PREFIX
# (table prefix, default soak_), SOAK_USERS/SOAK_PRODUCTS/SOAK_COMMENTS (demo
# sizes, default 5000/1000/50000), SOAK_PORT (default 18080), SOAK_OUT_DIR
# (logs and the report, default target/soak). HBase must be running
# (`hbase/hbasectl start`). The tables stay afterwards, so a second run skips
# the load; `target/release/reviews-admin schema drop --table-prefix soak_`
# removes them.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/lib.sh

THRIFT_ADDR="${REVIEWS_THRIFT_ADDR:-127.0.0.1:9090}"
PREFIX="${SOAK_PREFIX:-soak_}"
USERS="${SOAK_USERS:-5000}"
PRODUCTS="${SOAK_PRODUCTS:-1000}"
COMMENTS="${SOAK_COMMENTS:-50000}"
PORT="${SOAK_PORT:-18080}"
OUT_DIR="${SOAK_OUT_DIR:-target/soak}"
mkdir -p "$OUT_DIR"

build_release_binaries

hbase_flags=(--thrift-addr "$THRIFT_ADDR" --table-prefix "$PREFIX")
echo "soak: loading the demo data under prefix $PREFIX (skipped when already loaded)"
"$BIN/reviews-admin" demo load "${hbase_flags[@]}" --users "$USERS" --products "$PRODUCTS" --comments "$COMMENTS"
echo "soak: ranking every product"
"$BIN/ranker" run "${hbase_flags[@]}" >"$OUT_DIR/ranker.txt" 2>&1 || {
  tail -n 20 "$OUT_DIR/ranker.txt" >&2
  exit 1
}
tail -n 12 "$OUT_DIR/ranker.txt"

echo "soak: starting query-api on 127.0.0.1:$PORT (log: $OUT_DIR/query-api.log)"
api_pid=
# Stop only the service this script started, and wait for its drain.
trap '[[ -n "$api_pid" ]] && { kill -TERM "$api_pid" 2>/dev/null; wait "$api_pid" 2>/dev/null; }; true' EXIT
start_query_api "$PORT" "$OUT_DIR/query-api.log" "${hbase_flags[@]}"

echo "soak: machine load before the run: $(cut -d' ' -f1-3 /proc/loadavg)"
status=0
"$BIN/soak" --base "http://127.0.0.1:$PORT" --pid "$api_pid" --products "$PRODUCTS" --users "$USERS" "$@" |
  tee "$OUT_DIR/soak.txt" || status=$?
echo "soak: machine load after the run: $(cut -d' ' -f1-3 /proc/loadavg)"
curl -fsS "http://127.0.0.1:$PORT/metrics" | grep -E '^(reviews_api_http_requests_total|reviews_skipped_rows_total)' \
  >"$OUT_DIR/metrics.txt" || true
echo "soak: report in $OUT_DIR/soak.txt, request counts by route and status in $OUT_DIR/metrics.txt"
exit "$status"
