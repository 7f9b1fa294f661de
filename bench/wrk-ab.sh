#!/usr/bin/env bash
# One read as a server-bound load generator sees it: wrk (Debian's, one
# thread, 32 connections) against two query-api configurations, A and B,
# and the anchor (bench/src/bin/anchor.rs: axum answering the same answer's
# bytes and nothing else). api-bench's own client (reqwest) needs more CPU
# per request than the service's cached reads, so on this 2-core machine it
# is the bottleneck and hides what the service costs; wrk is not.
#
# Each round runs A B N N B A (N: the anchor), so every configuration's
# runs sit at the same mean position and drift falls on all alike. Per
# round it prints each one's mean req/s and server CPU time per request
# (from /proc), and B / A, A / anchor, B / anchor (req/s); every run's
# figures go to bench/out/wrk-ab/runs.csv.
#
#   bench/wrk-ab.sh [OPTIONS]
#
#   --a-bin PATH      A's query-api              [target/release/query-api]
#   --b-bin PATH      B's query-api              [the same]
#   --a-env 'K=V ..'  A's extra environment      []
#   --b-env 'K=V ..'  B's extra environment      []
#   --path PATH       the read                   [/v1/products/P000000001/comments/ranked]
#   --browser         send a browser's Accept-Encoding (gzip, deflate, br, zstd)
#   --rounds N        rounds                     [3]
#   --seconds S       measured seconds per run   [8]
#   --table-prefix P  the data set               [bench_]
#
# For example, the cost of exporting 1 % of traces (Jaeger from
# scripts/jaeger.sh run, on its default port):
#   bench/wrk-ab.sh --b-env 'OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318
#     OTEL_TRACES_SAMPLER=traceidratio OTEL_TRACES_SAMPLER_ARG=0.01'
# Both services keep a ranking for an hour, so the ranked read is a cache
# hit after the first request.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/lib.sh

a_bin=target/release/query-api b_bin="" a_env="" b_env=""
path=/v1/products/P000000001/comments/ranked
rounds=3 seconds=8 prefix=bench_ browser=""
while [ $# -gt 0 ]; do
  case "$1" in
    --a-bin) a_bin=$2; shift 2 ;;
    --b-bin) b_bin=$2; shift 2 ;;
    --a-env) a_env=$2; shift 2 ;;
    --b-env) b_env=$2; shift 2 ;;
    --path) path=$2; shift 2 ;;
    --browser) browser=1; shift ;;
    --rounds) rounds=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    --table-prefix) prefix=$2; shift 2 ;;
    *) echo "wrk-ab.sh: unknown option $1 (see the comment at the top)" >&2; exit 2 ;;
  esac
done
b_bin=${b_bin:-$a_bin}
ensure_debian_package wrk wrk
build_release_binaries
out=bench/out/wrk-ab
rm -rf "$out" && mkdir -p "$out"

pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true' EXIT
# start NAME PORT BIN ENV: a query-api with a ranking cache that outlives the
# run, logging at the service's own default level (info) unless ENV sets
# RUST_LOG.
start() {
  QUERY_API_BIN=$3 QUERY_API_ENV="RUST_LOG=info $4" start_query_api "$2" "$out/$1.log" --table-prefix "$prefix" \
    --pool-size 32 --ranked-cache-ttl-ms 3600000
  pids+=("$api_pid")
}
start A 18121 "$a_bin" "$a_env"
start B 18122 "$b_bin" "$b_env"
# The anchor answers what A answers for the read, as identity.
curl -fsS "http://127.0.0.1:18121$path" -o "$out/anchor-body"
curl -fsS "http://127.0.0.1:18122$path" -o /dev/null
target/release/anchor --listen 127.0.0.1:18123 --body "$out/anchor-body" >"$out/anchor.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 60); do
  curl -fsS http://127.0.0.1:18123/anchor -o /dev/null 2>/dev/null && break
  sleep 0.5
done
declare -A pid_of=([A]=${pids[0]} [B]=${pids[1]} [N]=${pids[2]})
declare -A url_of=([A]="http://127.0.0.1:18121$path" [B]="http://127.0.0.1:18122$path" [N]="http://127.0.0.1:18123/anchor")
headers=()
[ -n "$browser" ] && headers=(-H "Accept-Encoding: gzip, deflate, br, zstd")
ticks=$(getconf CLK_TCK)

# run WHO ROUND: one wrk run; appends "round,who,req_per_s,cpu_us_per_request" to runs.csv.
run() {
  local who=$1 round=$2 before after report requests rate
  before=$(awk '{print $14 + $15}' "/proc/${pid_of[$who]}/stat")
  report=$(wrk -t1 -c32 -d"${seconds}s" "${headers[@]}" "${url_of[$who]}")
  after=$(awk '{print $14 + $15}' "/proc/${pid_of[$who]}/stat")
  if grep -qE "Non-2xx|Socket errors" <<<"$report"; then
    echo "$who answered errors:" >&2
    echo "$report" >&2
    exit 1
  fi
  requests=$(awk '/requests in/ {print $1}' <<<"$report")
  rate=$(awk '/Requests\/sec/ {print $2}' <<<"$report")
  echo "$round,$who,$rate,$(awk -v t="$((after - before))" -v n="$requests" -v hz="$ticks" \
    'BEGIN {printf "%.2f", t * 1e6 / hz / n}')" >>"$out/runs.csv"
}

echo "round,who,req_per_s,cpu_us_per_request" >"$out/runs.csv"
for round in $(seq 1 "$rounds"); do
  for who in A B N N B A; do run "$who" "$round"; done
  awk -F, -v r="$round" '$1 == r {rate[$2] += $3; cpu[$2] += $4; n[$2]++}
    END {
      for (w in rate) {rate[w] /= n[w]; cpu[w] /= n[w]}
      printf "round %d: req/s A %.0f, B %.0f, anchor %.0f; CPU us/request A %.2f, B %.2f, anchor %.2f; ", r, rate["A"], rate["B"], rate["N"], cpu["A"], cpu["B"], cpu["N"]
      printf "B/A %.3f, A/anchor %.3f, B/anchor %.3f\n", rate["B"] / rate["A"], rate["A"] / rate["N"], rate["B"] / rate["N"]
    }' "$out/runs.csv"
done
