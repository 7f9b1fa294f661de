#!/usr/bin/env bash
# Fault test (issue 6): the HBase master JVM restarted while the query service
# is under load, and how long the service takes to recover by itself.
#
# It never touches the shared HBase: it starts a SEPARATE standalone HBase
# (master + regionserver + ZooKeeper, and its own Thrift gateway) in its own
# run dir on its own ports, loads a small demo data set, ranks it, starts the
# release `query-api` against it (its default deadlines), and drives
# load two ways at once: `soak` at a fixed rate of mixed routes (per-5-second
# windows), and a probe that asks one page ten times a second and logs each
# answer's status and time. Then it stops the master with SIGTERM, waits for it
# to exit, starts it again with `hbasectl start` (the gateway stays up), and
# keeps the load going. At the end it prints: answers by status during the
# outage, the slowest 503, the time from the master's return (and from its
# stop) until every probe answer is 200 again, and whether the page read
# after recovery equals the one read before (nothing lost). It exits non-zero
# on any 5xx other than 503, a request without an answer, a 503 slower than
# the deadline plus 1.5 s, a changed page, or no recovery.
#
# Usage: scripts/fault-master-restart.sh
# Environment: FAULT_RUN_DIR (default target/fault-master-hbase),
# FAULT_THRIFT_PORT (default 9390), FAULT_ZK_PORT (default 21990),
# FAULT_API_PORT (default 18090), FAULT_OUTAGE_SECS (how long the master stays
# down, default 5), FAULT_KEEP=1 keeps this HBase and its data afterwards.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/lib.sh

use_fault_hbase "$PWD/target/fault-master-hbase" 9390 21990
API_PORT="${FAULT_API_PORT:-18090}"
OUTAGE_SECS="${FAULT_OUTAGE_SECS:-5}"
THRIFT_ADDR="127.0.0.1:$HBASE_THRIFT_PORT"
PREFIX=fault_
OUT_DIR="$HBASE_RUN_DIR/report"
mkdir -p "$OUT_DIR"
now_ms() { date +%s%3N; }

build_release_binaries

api_pid=""
soak_pid=""
probe_pid=""
trap 'stop_fault_run "$probe_pid" "$soak_pid" "$api_pid"' EXIT

echo "fault: starting a separate HBase in $HBASE_RUN_DIR (thrift $THRIFT_ADDR, zookeeper $HBASE_ZK_PORT)"
hbase/hbasectl start
# Both gateways of this HBase: without --thrift2-addr the tools would reach
# for the default Thrift2 port, another HBase's or nobody's.
hbase_flags=(--thrift-addr "$THRIFT_ADDR" --thrift2-addr "127.0.0.1:$((HBASE_THRIFT_PORT + 1))" --table-prefix "$PREFIX")
"$BIN/reviews-admin" demo load "${hbase_flags[@]}" --users 500 --products 100 --comments 5000 >"$OUT_DIR/load.txt" 2>&1
"$BIN/ranker" run "${hbase_flags[@]}" >"$OUT_DIR/ranker.txt" 2>&1

RUST_LOG=warn start_query_api "$API_PORT" "$OUT_DIR/query-api.log" "${hbase_flags[@]}"
page="http://127.0.0.1:$API_PORT/v1/products/P000000001/comments?limit=50"
curl -fsS "$page" >"$OUT_DIR/page-before.json"

# The probe: one page every 100 ms; each line is "start_ms status seconds".
(
  while :; do
    started=$(now_ms)
    line=$(curl -s -o /dev/null --max-time 30 -w '%{http_code} %{time_total}' "$page" || true)
    echo "$started ${line:-000 0}"
    sleep 0.1
  done
) >"$OUT_DIR/probe.txt" &
probe_pid=$!
"$BIN/soak" --base "http://127.0.0.1:$API_PORT" --rate 40 --duration-secs 150 --window-secs 5 \
  --products 100 --users 500 --pid "$api_pid" >"$OUT_DIR/soak.txt" 2>&1 &
soak_pid=$!

sleep 10
master_pid="$(cat "$HBASE_RUN_DIR/master.pid")"
stop_ms=$(now_ms)
echo "fault: stopping the HBase master (pid $master_pid, SIGTERM)"
kill -TERM "$master_pid"
while kill -0 "$master_pid" 2>/dev/null; do sleep 0.2; done
stopped_ms=$(now_ms)
sleep "$OUTAGE_SECS"
echo "fault: starting the master again"
hbase/hbasectl start
back_ms=$(now_ms)
sleep 20
kill -TERM "$probe_pid" 2>/dev/null || true
probe_pid=""
kill -TERM "$soak_pid" 2>/dev/null || true
wait "$soak_pid" 2>/dev/null || true
soak_pid=""
curl -fsS "$page" >"$OUT_DIR/page-after.json"

cat "$OUT_DIR/soak.txt"
# The bound on a 503 follows query-api's default request deadline, read
# from its source rather than copied here.
request_timeout_ms=$(sed -n 's/^pub const DEFAULT_REQUEST_TIMEOUT_MS: u64 = \([0-9_]*\);$/\1/p' query-api/src/config.rs | tr -d _)
if [ -z "$request_timeout_ms" ]; then
  echo "fault-master-restart.sh: cannot read DEFAULT_REQUEST_TIMEOUT_MS from query-api/src/config.rs" >&2
  exit 1
fi
python3 - "$OUT_DIR" "$stop_ms" "$stopped_ms" "$back_ms" "$request_timeout_ms" <<'PY'
import json, sys
out, stop_ms, stopped_ms, back_ms, request_timeout_ms = sys.argv[1], *map(int, sys.argv[2:6])
slowest_allowed = request_timeout_ms / 1000 + 1.5
samples = []
with open(f"{out}/probe.txt") as probe:
    for line in probe:
        parts = line.split()
        if len(parts) == 3:
            samples.append((int(parts[0]), int(parts[1]), float(parts[2])))
by_status = {}
for _, status, _ in samples:
    by_status[status] = by_status.get(status, 0) + 1
outage = [s for s in samples if s[0] >= stop_ms and s[0] < back_ms]
unavailable = [s for s in samples if s[1] == 503]
failures_after = [s for s in samples if s[0] >= stop_ms and s[1] != 200]
last_failure = max((s[0] + int(s[2] * 1000) for s in failures_after), default=None)
before = json.load(open(f"{out}/page-before.json"))
after = json.load(open(f"{out}/page-after.json"))
print(f"probe: {len(samples)} requests, by status {dict(sorted(by_status.items()))}")
print(f"master stop took {(stopped_ms - stop_ms) / 1000:.1f} s; down {(back_ms - stopped_ms) / 1000:.1f} s "
      f"until 'hbasectl start' returned")
print(f"during the outage: {len(outage)} probe requests, "
      f"{sum(1 for s in outage if s[1] == 503)} x 503, {sum(1 for s in outage if s[1] == 200)} x 200; "
      f"slowest 503 {max((s[2] for s in unavailable), default=0):.2f} s")
if last_failure is None:
    print("no probe request failed")
else:
    print(f"recovered: last non-200 answer ended {(last_failure - back_ms) / 1000:+.1f} s after the master was back "
          f"({(last_failure - stop_ms) / 1000:.1f} s after the stop began)")
print(f"page after recovery equals the page before: {before == after} ({len(before['comments'])} comments)")
problems = []
if any(status not in (200, 503) for status in by_status):
    problems.append("answers other than 200 and 503 (000 = no answer)")
if unavailable and max(s[2] for s in unavailable) > slowest_allowed:
    problems.append(f"a 503 slower than {slowest_allowed:.1f} s (the request deadline plus 1.5 s)")
late = [s for s in samples if s[0] >= back_ms + 60_000 and s[1] != 200]
if late or not any(s[0] >= back_ms and s[1] == 200 for s in samples):
    problems.append("no recovery")
if before != after:
    problems.append("the page changed across the restart")
if problems:
    print("FAILED: " + "; ".join(problems))
    sys.exit(1)
print("passed")
PY
