#!/usr/bin/env bash
# Fault test (issue 37): the whole HBase restarted under a running query
# service, and a query service started cold right after an HBase restart.
#
# It never touches the shared HBase: it starts a SEPARATE standalone HBase
# (master, region server, ZooKeeper and both Thrift gateways) in its own run
# dir on its own ports, loads a demo data set of 200 products, ranks it, and
# starts the release `query-api` against it. Then, with `page-load` (every
# answer recorded, see bench/src/bin/page-load.rs):
#
# 1. Restart under load: every product's ranked, summary and first latest
#    page is read once, then mixed reads at FAULT_RATE (250) a second go on
#    while `hbasectl restart` stops and starts everything. Printed per route:
#    answers before, during and after the restart, failures, stale copies,
#    stale copies that differ from the last fresh answer (must be none), and
#    when each route last failed after HBase was back.
# 2. Cold start: `hbasectl restart` again, then a query-api started fresh
#    (nothing cached) at once, read at FAULT_COLD_RATE (500) a second for 40 s.
#    Printed: 5xx answers per 10 s window, by error code.
#
# It exits non-zero when a stale copy differs from the last fresh answer, when
# a product page's reads (ranked, summary, first latest page) fail more than
# 1 % during the restart or at all after it, or when user and cursor pages
# still fail 5 s after HBase is back.
#
# Usage: scripts/fault-hbase-restart.sh
# Environment: FAULT_RUN_DIR (default target/fault-restart-hbase),
# FAULT_THRIFT_PORT (default 9490; Thrift2 on the next port),
# FAULT_ZK_PORT (default 22090), FAULT_API_PORT (default 18190),
# FAULT_RATE (default 250), FAULT_COLD_RATE (default 500), FAULT_API_FLAGS
# (more query-api flags: "--stale-if-error-secs 0" shows the service without
# its last good copies), FAULT_KEEP=1 keeps this HBase and its data afterwards.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/lib.sh

use_fault_hbase "$PWD/target/fault-restart-hbase" 9490 22090
API_PORT="${FAULT_API_PORT:-18190}"
read -r -a api_flags <<<"${FAULT_API_FLAGS:-}"
RATE="${FAULT_RATE:-250}"
COLD_RATE="${FAULT_COLD_RATE:-500}"
PRODUCTS=200
USERS=2000
OUT_DIR="$HBASE_RUN_DIR/report"
mkdir -p "$OUT_DIR"
now_ms() { date +%s%3N; }

build_release_binaries

api_pid=""
load_pid=""
trap 'stop_fault_run "$load_pid" "$api_pid"' EXIT

echo "fault: starting a separate HBase in $HBASE_RUN_DIR (thrift 127.0.0.1:$HBASE_THRIFT_PORT)"
hbase/hbasectl start
hbase_flags=(--thrift-addr "127.0.0.1:$HBASE_THRIFT_PORT" --thrift2-addr "127.0.0.1:$HBASE_THRIFT2_PORT"
  --table-prefix fault_)
"$BIN/reviews-admin" demo load "${hbase_flags[@]}" --users "$USERS" --products "$PRODUCTS" --comments 20000 \
  >"$OUT_DIR/load.txt" 2>&1
"$BIN/ranker" run "${hbase_flags[@]}" >"$OUT_DIR/ranker.txt" 2>&1
base="http://127.0.0.1:$API_PORT"

# 1. Restart under load.
start_query_api "$API_PORT" "$OUT_DIR/query-api.log" "${hbase_flags[@]}" "${api_flags[@]}"
rm -f "$OUT_DIR/restart.jsonl"
"$BIN/page-load" --base "$base" --warm --rate "$RATE" --duration-secs 150 --products "$PRODUCTS" \
  --users "$USERS" --out "$OUT_DIR/restart.jsonl" &
load_pid=$!
until [[ -e "$OUT_DIR/restart.jsonl" ]]; do sleep 0.2; done
sleep 20
restart_ms=$(now_ms)
echo "fault: restarting HBase under $RATE reads a second"
hbase/hbasectl restart
back_ms=$(now_ms)
wait "$load_pid"
load_pid=""
kill -TERM "$api_pid"
wait "$api_pid" 2>/dev/null || true
api_pid=""

# 2. Cold start: a fresh query-api right after a restart.
echo "fault: restarting HBase, then a fresh query-api at $COLD_RATE reads a second"
hbase/hbasectl restart
start_query_api "$API_PORT" "$OUT_DIR/query-api-cold.log" "${hbase_flags[@]}" "${api_flags[@]}"
cold_ms=$(now_ms)
"$BIN/page-load" --base "$base" --rate "$COLD_RATE" --duration-secs 40 --products "$PRODUCTS" --users "$USERS" \
  --out "$OUT_DIR/cold.jsonl"

python3 - "$OUT_DIR" "$restart_ms" "$back_ms" "$cold_ms" <<'PY'
import collections, json, sys
out, restart_ms, back_ms, cold_ms = sys.argv[1], *map(int, sys.argv[2:5])
def answers(name):
    with open(f"{out}/{name}") as lines:
        return [json.loads(line) for line in lines if line.strip()]
kept = {"ranked", "summary", "latest"}
problems = []

restart = answers("restart.jsonl")
print(f"restart: HBase down and back in {(back_ms - restart_ms) / 1000:.1f} s ('hbasectl restart')")
print(f"{'route':10} {'phase':7} {'answers':>8} {'failed':>7} {'stale':>6} {'wrong':>6}  failure share")
for route in ["ranked", "summary", "latest", "user", "next-page"]:
    for phase, inside in [("before", lambda a: a["due_ms"] < restart_ms),
                          ("during", lambda a: restart_ms <= a["due_ms"] < back_ms),
                          ("after", lambda a: a["due_ms"] >= back_ms)]:
        seen = [a for a in restart if a["route"] == route and inside(a)]
        failed = [a for a in seen if a["status"] != 200]
        stale = [a for a in seen if a["stale"]]
        wrong = [a for a in stale if a.get("same_as_last_fresh") is not True]
        share = len(failed) / len(seen) if seen else 0.0
        print(f"{route:10} {phase:7} {len(seen):8} {len(failed):7} {len(stale):6} {len(wrong):6}  {share:.2%}")
        if wrong:
            problems.append(f"{len(wrong)} stale {route} answers differ from the last fresh one")
        if route in kept and phase == "during" and share > 0.01:
            problems.append(f"{route}: {share:.2%} failed during the restart")
        if route in kept and phase == "after" and failed:
            problems.append(f"{route}: {len(failed)} failed after HBase was back")
    late = [a["due_ms"] + a["latency_ms"] - back_ms for a in restart
            if a["route"] == route and a["due_ms"] >= back_ms and a["status"] != 200]
    if late:
        print(f"{route:10} last failure ended {max(late) / 1000:+.1f} s after HBase was back")
        if max(late) > 5000:
            problems.append(f"{route}: still failing {max(late) / 1000:.1f} s after HBase was back")
codes = collections.Counter((a["route"], a["code"]) for a in restart if a["status"] != 200)
if codes:
    print("failures by route and code: " + ", ".join(f"{r} {c}: {n}" for (r, c), n in sorted(codes.items())))

cold = answers("cold.jsonl")
print(f"cold start at {len(cold) / 40:.0f} reads a second, query-api started as 'hbasectl restart' returned:")
total_5xx = 0
for window in range(4):
    start, end = cold_ms + window * 10_000, cold_ms + (window + 1) * 10_000
    seen = [a for a in cold if start <= a["due_ms"] < end]
    failed = [a for a in seen if a["status"] >= 500 or a["status"] == 0]
    total_5xx += len(failed)
    by_code = collections.Counter(a["code"] for a in failed)
    print(f"  {window * 10:2}-{window * 10 + 10:2} s: {len(seen):6} answers, {len(failed):6} 5xx "
          f"({len(failed) / max(len(seen), 1):.1%}) {dict(by_code)}")
print(f"  first 40 s: {total_5xx} of {len(cold)} answered 5xx ({total_5xx / max(len(cold), 1):.1%})")

if problems:
    print("FAILED: " + "; ".join(problems))
    sys.exit(1)
print("passed")
PY
