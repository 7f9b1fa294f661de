#!/usr/bin/env bash
# The instructions query-api's router and the anchor's each execute per
# cached read, in process (app-cost, one thread), counted by valgrind's
# callgrind inside app-cost's `answer` only (the router's call and the
# answer's body): not the request's making, nor the runtime's other tasks,
# which tick by the clock and so count more the slower callgrind runs.
# Counted so, a figure repeats to a few instructions, so a change worth 1 %
# of a request shows in one run.
# Instructions are not time (a copy of a large future is a few instructions;
# two workers contending for one cache line are none): confirm what matters
# with bench/wrk-ab.sh; bench/server-instructions.sh counts whole processes
# over HTTP.
#
# Each router runs twice at N and at 2N requests (--only); the difference
# leaves out the set-up (reading the ranking once, compressing the widget
# script), so per request = (at 2N - at N) / 2N.
#
#   bench/app-instructions.sh [APP_COST_BIN] [-- query-api flags]
#
# APP_COST_BIN defaults to target/release/app-cost (built here when it is
# that one); the flags default to `--table-prefix bench_` (bench/load.sh,
# then `ranker run --table-prefix bench_ --product P000000001`); installs
# valgrind from Debian's packages when it is missing; about a minute.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/lib.sh
bin=target/release/app-cost
if [[ $# -gt 0 && $1 != -- ]]; then bin=$1; shift; else cargo build --release --locked -p bench --bin app-cost; fi
[[ ${1:-} == -- ]] && shift
flags=("$@")
[[ ${#flags[@]} -eq 0 ]] && flags=(--table-prefix bench_)
ensure_debian_package valgrind valgrind
requests=10000
# instructions ONLY N: what callgrind counted inside `answer` in an app-cost run.
instructions() {
  valgrind --tool=callgrind --callgrind-out-file=/dev/null '--toggle-collect=app_cost::answer*' \
    "$bin" --only "$1" --rounds 1 --requests "$2" \
    -- "${flags[@]}" 2>&1 >/dev/null | awk '/Collected :/ { gsub(",", "", $NF); print $NF }'
}
declare -A per_request
for only in service anchor; do
  small=$(instructions "$only" "$requests")
  large=$(instructions "$only" $((2 * requests)))
  per_request[$only]=$(((large - small) / (2 * requests)))
  # A router's read is thousands of instructions: far fewer means the
  # compiler folded `answer` into its caller and nothing was counted.
  if ((per_request[$only] < 1000)); then
    echo "app-instructions: callgrind counted ${per_request[$only]} instructions a request inside app_cost::answer;" \
      "was it inlined?" >&2
    exit 1
  fi
done
awk -v service="${per_request[service]}" -v anchor="${per_request[anchor]}" \
  'BEGIN { printf "instructions per request: query-api %d, anchor %d, ratio %.2f\n", service, anchor, service / anchor }'
