#!/usr/bin/env bash
# The instructions the whole query-api process and the whole anchor process
# each execute per cached ranked read over HTTP (hyper, the connection's
# task, the router, the runtime), counted by valgrind's callgrind while wrk
# (one thread, 32 connections, 10 s) drives each in turn. Beside
# bench/app-instructions.sh (the router alone, in process) it says how much
# of the service's extra cost lies outside its router: the difference of the
# two figures here, set beside the router's difference there.
#
# Under callgrind a server serves about a hundredth of its usual rate, so
# counts, not times, are what this reports; the time a request waits for a
# line another worker wrote is in neither (bench/wrk-ab.sh shows it).
#
#   bench/server-instructions.sh [--table-prefix P]   (default bench_)
#
# Needs HBase with the bench data (bench/load.sh, then
# `ranker run --table-prefix bench_ --product P000000001`), valgrind and wrk;
# about a minute after the release build.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/lib.sh

prefix=bench_
[ "${1:-}" = --table-prefix ] && prefix=$2
path=/v1/products/P000000001/comments/ranked
ensure_debian_package wrk wrk
ensure_debian_package valgrind valgrind
build_release_binaries
out=bench/out/server-instructions
rm -rf "$out" && mkdir -p "$out"
server_pid=""
trap '[ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null || true' EXIT

# count NAME URL -- COMMAND...: COMMAND under callgrind; once URL answers
# (its answer kept in $out/NAME.body), 200 requests warm it (the ranking read
# and cached, the connections' first allocations), the counts are zeroed, wrk
# runs, the counts are dumped.
# Sets `counted` to "instructions requests" (not printed for a command
# substitution: the EXIT trap that stops the server is not a subshell's).
count() {
  local name=$1 url=$2
  shift 3
  valgrind --tool=callgrind --callgrind-out-file="$out/$name.%p" "$@" >"$out/$name.log" 2>&1 &
  server_pid=$!
  local _
  for _ in $(seq 1 120); do
    curl -fsS "$url" -o "$out/$name.body" 2>/dev/null && break
    sleep 1
  done
  for _ in $(seq 1 200); do curl -fsS "$url" -o /dev/null; done
  callgrind_control --zero "$server_pid" >/dev/null
  wrk -t1 -c32 -d10s "$url" >"$out/$name.wrk"
  callgrind_control --dump "$server_pid" >/dev/null
  kill "$server_pid"
  wait "$server_pid" 2>/dev/null || true
  server_pid=""
  if grep -qE "Non-2xx|Socket errors" "$out/$name.wrk"; then
    echo "server-instructions: $name answered errors:" >&2
    cat "$out/$name.wrk" >&2
    exit 1
  fi
  # The dump after zeroing is the one whose name ends in .1.
  counted="$(callgrind_annotate "$out/$name".*.1 2>/dev/null | awk '/PROGRAM TOTALS/ { gsub(",", "", $1); print $1 }') \
$(awk '/requests in/ { print $1 }' "$out/$name.wrk")"
}

RUST_LOG=info count query-api "http://127.0.0.1:18141$path" -- target/release/query-api \
  --listen 127.0.0.1:18141 --table-prefix "$prefix" --pool-size 32 --ranked-cache-ttl-ms 3600000
service=$counted
# The anchor answers the bytes query-api answered, as identity.
count anchor "http://127.0.0.1:18143/anchor" -- target/release/anchor --listen 127.0.0.1:18143 \
  --body "$out/query-api.body"
anchor=$counted
awk -v service="$service" -v anchor="$anchor" 'BEGIN {
  split(service, s, " "); split(anchor, a, " ")
  per_service = s[1] / s[2]; per_anchor = a[1] / a[2]
  printf "instructions per request over HTTP: query-api %d (%d requests), anchor %d (%d requests), difference %d, ratio %.2f\n",
    per_service, s[2], per_anchor, a[2], per_service - per_anchor, per_service / per_anchor
}'
