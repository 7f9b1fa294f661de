#!/usr/bin/env bash
# Fault test (issue 51): any one process of a deployment killed with SIGKILL
# under every kind of read a frontend makes, through a real proxy, with a
# ranking run going; then the next, once the first is back.
#
# It never touches the shared HBase: it starts a SEPARATE deployment-shaped
# HBase in its own run dir on its own ports (`hbasectl start --regionservers 4
# --gateways 2 --zookeepers 3`: four region servers, the first holding
# hbase:meta alone and three the user regions, two Thrift1 and two Thrift2
# gateways, a ZooKeeper ensemble of three, a master, each a JVM of its
# own), creates the tables (6 regions; with FAULT_REPLICAS=2, the
# default, the tables a page reads get two replicas per region), loads the
# demo data set of 200 products, ranks it and flushes it, and starts two release
# query-api replicas with their defaults (both gateway lists; `auto` reads
# timeline on replicated tables) behind HAProxy with the project's
# configuration (deploy/haproxy/query-api.cfg; Debian's haproxy, installed
# when missing).
#
# Then one round per victim, in this order: the region server holding
# hbase:meta's primary, the region server holding the most primaries of the
# user tables, Thrift1 gateway 1, Thrift2 gateway 1, the first query-api
# replica, the master, the ZooKeeper leader, each chosen as its round
# begins, before its reads (asked at the kill, `hbasectl regions` took 7 to
# 12 s on a loaded machine). Each round reads for FAULT_ROUND_SECS (70;
# a region server's, FAULT_RS_ROUND_SECS, 120: its restart and the
# balancer's moves after it, below, have ended 45 to 105 s after the kill)
# at FAULT_RATE (250) reads a second through the proxy, of every kind
# (`page-load` with every route: ranked, summary, latest, deep and next
# cursor pages, user timelines, one-star and rating-ordered pages, listing
# summaries, single reviews, reviews.html); ten seconds in, a ranking run
# starts, and a second later the victim is killed with SIGKILL. The victim is
# started again once its loss is repaired (a region server: once HBase has
# reopened its regions elsewhere; the others at once) and the next round
# waits until it serves. A region server started again holds nothing until
# the master's balancer moves regions back to it, which its chore does at
# its next run (every 5 minutes), in whichever round runs then: so the
# balancer is asked at once (`hbasectl balance`), and its moves are read
# through in the round of the restart that caused them.
#
# Printed: the warm-up minute's reads, failed and p99 (nothing killed, no
# ranking run: what the machine carries); then, per round: reads from the
# kill to the round's end, failed (any status but 200, or no answer), p99
# and max latency, the share answered from a secondary replica or a last
# good copy, seconds until the victim's loss was repaired and until it
# served again (a region server: with its regions balanced back), the
# ranking run's exit status, and the cores each kind of process used (and
# the machine left idle, and the JVMs' JIT compilers took) in the 10 s
# before the ranking run and from it (a second before the kill) until 5 s
# after the repair (scripts/cpu-sampler.py, report/cpu.csv); then every product's
# ranked reviews, summary and whole latest list compared with before the
# faults; and the resident memory of every process.
#
# It exits non-zero when a read failed, a ranking run did not exit 0, an
# answer differs after the faults, or a process is not running at the end
# (with the line its output or log ended on: an OutOfMemoryError, an abort);
# and it stops at once, saying how many region replicas of each table no
# live server holds, when a killed region server's regions are not all
# served again within 300 s (another region server died meanwhile: on an
# overloaded machine, one that lost its ZooKeeper session or its heap).
#
# Usage: scripts/fault-any-one.sh
# Environment: FAULT_REPLICAS (2, or 1 for none), FAULT_RUN_DIR (default
# target/fault-any-one-hbase), FAULT_THRIFT_PORT (default 9690: Thrift1
# gateways on 9690 and 9692, Thrift2 on 9691 and 9693), FAULT_ZK_PORT
# (default 22390), FAULT_META_SERVER (dedicated, or shared), FAULT_API_PORT
# (default 18490: the proxy; the replicas on the next two), FAULT_RATE
# (250), FAULT_ROUND_SECS (70), FAULT_RS_ROUND_SECS (120), FAULT_VICTIMS
# (a comma-separated subset of meta-rs,busiest-rs,thrift1,thrift2,query-api,
# master,zookeeper, or none: a control round, the ranking run and the reads
# with nothing killed), FAULT_HAPROXY_CFG (default
# deploy/haproxy/query-api.cfg: another proxy configuration to compare),
# FAULT_KEEP=1 keeps the cluster and its data.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/lib.sh

use_fault_hbase "$PWD/target/fault-any-one-hbase" 9690 22390
unset HBASE_MASTER_HEAP HBASE_REGIONSERVERS HBASE_GATEWAYS HBASE_ZOOKEEPERS HBASE_META_SERVER
PROXY_PORT="${FAULT_API_PORT:-18490}"
API_PORTS=("$((PROXY_PORT + 1))" "$((PROXY_PORT + 2))")
RATE="${FAULT_RATE:-250}"
ROUND_SECS="${FAULT_ROUND_SECS:-70}"
RS_ROUND_SECS="${FAULT_RS_ROUND_SECS:-120}"
REPLICAS="${FAULT_REPLICAS:-2}"
VICTIMS="${FAULT_VICTIMS:-meta-rs,busiest-rs,thrift1,thrift2,query-api,master,zookeeper}"
PRODUCTS=200
USERS=2000
AS_OF=1793491200000
PREFIX=fault_
OUT_DIR="$HBASE_RUN_DIR/report"
ROUTES=ranked,summary,latest,deep-page,next-page,user,star,rating-order,summaries,review,html
now_ms() { date +%s%3N; }
[[ "$REPLICAS" =~ ^[12]$ ]] || {
  echo "FAULT_REPLICAS must be 1 or 2" >&2
  exit 2
}
[[ "$VICTIMS" =~ ^(meta-rs|busiest-rs|thrift1|thrift2|query-api|master|zookeeper|none)(,(meta-rs|busiest-rs|thrift1|thrift2|query-api|master|zookeeper|none))*$ ]] || {
  echo "FAULT_VICTIMS: a comma-separated list of meta-rs, busiest-rs, thrift1, thrift2, query-api, master, zookeeper, none" >&2
  exit 2
}

ensure_haproxy
build_release_binaries

api_pids=("" "")
proxy_pid=""
load_pid=""
ranker_pid=""
sampler_pid=""
cleanup() {
  stop_fault_run --kill "$ranker_pid" "$load_pid" "${api_pids[@]}" "$proxy_pid" "$sampler_pid"
}
trap cleanup EXIT

echo "fault: a fresh deployment-shaped HBase in $HBASE_RUN_DIR"
hbase/hbasectl discard >/dev/null 2>&1 || true
started_ms=$(now_ms)
# Region server 1 holds hbase:meta alone (hbasectl's default for a cluster of
# three or more); three more hold the user regions, so one's death leaves
# two. FAULT_META_SERVER=shared puts meta among them.
hbase/hbasectl start --regionservers 4 --gateways 2 --zookeepers 3 --meta-server "${FAULT_META_SERVER:-dedicated}"
echo "fault: cluster up in $((($(now_ms) - started_ms) / 1000)) s"
mkdir -p "$OUT_DIR"
rm -f "$OUT_DIR"/round-*.jsonl "$OUT_DIR/rounds.txt"
t1="127.0.0.1:$HBASE_THRIFT_PORT,127.0.0.1:$((HBASE_THRIFT_PORT + 2))"
t2="127.0.0.1:$HBASE_THRIFT2_PORT,127.0.0.1:$((HBASE_THRIFT2_PORT + 2))"
hbase_flags=(--thrift-addr "$t1" --thrift2-addr "$t2" --table-prefix "$PREFIX")
"$BIN/reviews-admin" schema create "${hbase_flags[@]}" --regions 6 --region-replication "$REPLICAS" \
  >"$OUT_DIR/schema.txt"
"$BIN/reviews-admin" demo load "${hbase_flags[@]}" --users "$USERS" --products "$PRODUCTS" --comments 20000 \
  >"$OUT_DIR/load.txt" 2>&1
"$BIN/ranker" run "${hbase_flags[@]}" --as-of "$AS_OF" >"$OUT_DIR/ranker-first.txt" 2>&1
# As a shop's months-old reviews are: in store files, not only in memstores.
# A replica reopened after a crash serves what its primary flushed, so an
# unflushed load would read as missing there for as long as the recovery.
hbase/hbasectl flush "$PREFIX" >"$OUT_DIR/flush.txt"

# start_replica K: query-api replica K (0 or 1) with its defaults, behind the proxy.
start_replica() {
  start_query_api "${API_PORTS[$1]}" "$OUT_DIR/query-api-$1.log" "${hbase_flags[@]}" \
    --unready-before-drain-ms 3000 --trusted-proxies 127.0.0.1/32
  api_pids[$1]=$api_pid
}
start_replica 0
start_replica 1
REVIEWS_PROXY_LISTEN="127.0.0.1:$PROXY_PORT" REVIEWS_API_1="127.0.0.1:${API_PORTS[0]}" \
  REVIEWS_API_2="127.0.0.1:${API_PORTS[1]}" haproxy -f "${FAULT_HAPROXY_CFG:-deploy/haproxy/query-api.cfg}" >"$OUT_DIR/haproxy.log" 2>&1 &
proxy_pid=$!
base="http://127.0.0.1:$PROXY_PORT"
until curl -fsS "$base/readyz" >/dev/null 2>&1; do
  kill -0 "$proxy_pid" 2>/dev/null || {
    cat "$OUT_DIR/haproxy.log" >&2
    exit 1
  }
  sleep 0.2
done
"$BIN/page-load" --base "$base" --products "$PRODUCTS" --snapshot --out "$OUT_DIR/before.json"

# Where every region's replicas are served (`hbasectl regions`), saved in
# $OUT_DIR/regions.txt, once every primary is on a server hbasectl knows as
# live (not "rs-?"): on a loaded machine the gateway may not answer within
# the probe's 10 s, so it is asked up to three times, 5 s apart.
region_listing() {
  local attempt
  for attempt in 1 2 3; do
    ((attempt == 1)) || sleep 5
    hbase/hbasectl regions >"$OUT_DIR/regions.txt" 2>"$OUT_DIR/regions.err" || continue
    if grep -q ' 0$' "$OUT_DIR/regions.txt" && ! grep -q '^rs-? .* 0$' "$OUT_DIR/regions.txt"; then
      cat "$OUT_DIR/regions.txt"
      return 0
    fi
  done
  echo "fault: hbasectl regions did not place every primary in three tries; its last answer:" >&2
  cat "$OUT_DIR/regions.txt" "$OUT_DIR/regions.err" >&2
  return 1
}

# The region server (its number) holding hbase:meta's primary.
meta_server() {
  region_listing | awk '$2 == "hbase:meta" && $3 == 0 { print substr($1, 4); exit }'
}

# The region server holding the most primaries of the user tables, of those
# not holding hbase:meta's primary.
busiest_server() {
  region_listing | awk -v prefix="$PREFIX" '$2 == "hbase:meta" && $3 == 0 { meta = $1 }
    index($2, prefix) == 1 && $3 == 0 { n[$1]++ }
    END { for (s in n) if (s != meta && n[s] > best) { best = n[s]; pick = s } print substr(pick, 4) }'
}

zookeeper_leader() {
  hbase/hbasectl status | awk '/^zk-[0-9]+:.*leader/ { sub(/^zk-/, "", $1); sub(/:$/, "", $1); print $1; exit }'
}

# choose_victim NAME: which process the round kills, as "WHAT NUMBER" (how
# to bring it back). Asked before the round's reads begin: on a loaded
# machine `hbasectl regions` can take seconds, and asked at the kill it
# would push the kill that much past the ranking run's start.
choose_victim() {
  case "$1" in
    none) echo "none" ;;
    meta-rs) echo "rs $(meta_server)" ;;
    busiest-rs) echo "rs $(busiest_server)" ;;
    thrift1) echo "gateway thrift1-1" ;;
    thrift2) echo "gateway thrift2-1" ;;
    query-api) echo "replica 0" ;;
    master) echo "master" ;;
    zookeeper) echo "zk $(zookeeper_leader)" ;;
  esac
}

# kill_victim WHAT NUMBER: kills the process choose_victim named.
kill_victim() {
  case "$1" in
    none) ;;
    rs) hbase/hbasectl kill-rs "$2" ;;
    gateway) hbase/hbasectl kill-gateway "$2" ;;
    replica) kill -KILL "${api_pids[$2]}" ;;
    master) hbase/hbasectl kill-master ;;
    zk) hbase/hbasectl kill-zk "$2" ;;
  esac
}

# revive WHAT NUMBER: starts the victim again and waits until it serves.
revive() {
  case "$1" in
    rs)
      hbase/hbasectl start-rs "$2" >&2
      # The balancer chore would make the moves all the same: one that
      # does not finish here is said, and the round goes on.
      hbase/hbasectl balance >&2 || echo "fault: the balancer did not finish after region server $2's restart" >&2
      ;;
    gateway) hbase/hbasectl start-gateway "$2" >&2 ;;
    replica)
      # Wait for the killed replica, so that the new one binds the port only
      # after the old one's listener is gone ("Address already in use"
      # otherwise, seen on a loaded machine).
      wait "${api_pids[$2]}" 2>/dev/null || true
      start_replica "$2"
      ;;
    master) hbase/hbasectl start-master >&2 ;;
    zk) hbase/hbasectl start-zk "$2" >&2 ;;
    none) ;;
  esac
}

# Every process's CPU, once a second from here on, for the report.
rm -f "$OUT_DIR/cpu.csv"
python3 scripts/cpu-sampler.py "$HBASE_RUN_DIR" "$OUT_DIR/cpu.csv" &
sampler_pid=$!

# One warm-up minute through the proxy, not counted: a cluster just started
# serves its first minute slowly (cold JVMs, empty block caches).
"$BIN/page-load" --base "$base" --warm --rate "$RATE" --duration-secs 60 --products "$PRODUCTS" --users "$USERS" \
  --routes "$ROUTES" --out "$OUT_DIR/warm-up.jsonl"

IFS=, read -r -a victims <<<"$VICTIMS"
for victim in "${victims[@]}"; do
  reads="$OUT_DIR/round-$victim.jsonl"
  read -r what number < <(choose_victim "$victim")
  if [[ "$what" == rs || "$what" == zk ]] && ! [[ "${number:-}" =~ ^[0-9]+$ ]]; then
    echo "fault: $victim: hbasectl named no such process to kill" >&2
    exit 1
  fi
  round_secs=$ROUND_SECS
  [[ "$what" != rs ]] || round_secs=$RS_ROUND_SECS
  "$BIN/page-load" --base "$base" --warm --rate "$RATE" --duration-secs "$round_secs" --products "$PRODUCTS" \
    --users "$USERS" --routes "$ROUTES" --out "$reads" &
  load_pid=$!
  until [[ -e "$reads" ]]; do sleep 0.2; done
  sleep 9
  ranking_ms=$(now_ms)
  "$BIN/ranker" run "${hbase_flags[@]}" --as-of "$AS_OF" >"$OUT_DIR/ranker-$victim.txt" 2>&1 &
  ranker_pid=$!
  sleep 1
  killed_ms=$(now_ms)
  kill_victim "$what" "${number:-}" >&2
  echo "fault: $victim: killed $what ${number:-}"
  if [[ "$what" == rs ]]; then
    wait_all_served || exit 1
  fi
  repaired_ms=$(now_ms)
  revive "$what" "${number:-}"
  served_ms=$(now_ms)
  ranker_status=0
  wait "$ranker_pid" || ranker_status=$?
  ranker_pid=""
  wait "$load_pid"
  load_pid=""
  echo "fault: $victim: repaired after $(((repaired_ms - killed_ms) / 1000)) s, serving again after $(((served_ms - killed_ms) / 1000)) s, ranking run exited $ranker_status"
  printf '%s %s %s %s %s %s\n' "$victim" "$ranking_ms" "$killed_ms" "$repaired_ms" "$served_ms" "$ranker_status" \
    >>"$OUT_DIR/rounds.txt"
  # Every process of the deployment serving again before the next victim;
  # a query-api replica still not ready after two minutes stops the run,
  # naming it and its log.
  for replica in 0 1; do
    within 120 curl -fsS -o /dev/null "http://127.0.0.1:${API_PORTS[$replica]}/readyz" 2>/dev/null || {
      echo "fault: $victim: query-api replica $replica not ready 120 s after the round; see $OUT_DIR/query-api-$replica.log" >&2
      exit 1
    }
  done
  sleep 5
done

# The rounds' CPU is all sampled; the report reads it whole.
kill "$sampler_pid" 2>/dev/null || true
wait "$sampler_pid" 2>/dev/null || true
sampler_pid=""
"$BIN/page-load" --base "$base" --products "$PRODUCTS" --snapshot --out "$OUT_DIR/after.json"
memory="$(for pidfile in "$HBASE_RUN_DIR"/*.pid; do
  printf '%s %s\n' "$(basename "$pidfile" .pid)" "$(ps -o rss= -p "$(cat "$pidfile")" 2>/dev/null || echo 0)"
done
for k in 0 1; do printf 'query-api-%s %s\n' "$k" "$(ps -o rss= -p "${api_pids[$k]}" || echo 0)"; done
printf 'haproxy %s\n' "$(ps -o rss= -p "$proxy_pid" || echo 0)")"

python3 - "$OUT_DIR" "$memory" "$HBASE_RUN_DIR/logs" <<'PY'
import json, sys
sys.path.insert(0, "scripts")
import cpu_samples
out, memory, logs = sys.argv[1], sys.argv[2], sys.argv[3]
rounds = [line.split() for line in open(f"{out}/rounds.txt")]
problems = []

def cause_of_death(name):
    """What a JVM of the run said as it stopped, from its last start's output
    and log (hbasectl starts each life with new ones): `: <the line>`, or
    nothing when neither says."""
    for path, marks in ((f"{logs}/{name}.out", ("Terminating due to", "OutOfMemoryError")),
                        (f"{logs}/{name}.log", ("ABORTING region server", "received expired from ZooKeeper"))):
        try:
            said = [line.strip() for line in open(path, errors="replace") if any(mark in line for mark in marks)]
        except OSError:
            continue
        if said:
            return f": {said[-1][:240]}"
    return ""


# Where the CPU went (scripts/cpu-sampler.py), by kind of process.
samples = cpu_samples.read(f"{out}/cpu.csv")


def kind_of(name):
    for prefix, kind in (("thrift2", "thrift2"), ("thrift", "thrift1"), ("zk-", "zookeeper")):
        if name.startswith(prefix):
            return kind
    return name


def cores(start_ms, end_ms):
    """Cores each kind of process used on average in the samples ending
    from start_ms to end_ms: `idle`, `jit`, each region server, the Thrift1
    and the Thrift2 gateways, the ZooKeeper peers, the master, query-api, ..."""
    return cpu_samples.cores(samples, start_ms, end_ms, kind_of)


def p99(values):
    values = sorted(values)
    return values[min(len(values) - 1, int(len(values) * 0.99))] if values else 0.0

# What the deployment carries with nothing killed and no ranking run: when
# the warm-up minute failed reads too, the rounds measure the machine's
# capacity as much as the deaths.
warm = [json.loads(line) for line in open(f"{out}/warm-up.jsonl") if line.strip()]
warm_failed = sum(1 for a in warm if a["status"] != 200)
print(f"warm-up minute (nothing killed, no ranking run): {len(warm)} reads, {warm_failed} failed, "
      f"p99 {p99([a['latency_ms'] for a in warm]):.0f} ms")
print(f"{'victim':11} {'reads':>6} {'failed':>6} {'p99 ms':>7} {'max ms':>7} {'stale %':>7} {'repaired s':>10} {'serving s':>9} {'ranker':>6}")
for victim, ranking, killed, repaired, served, ranker in rounds:
    ranking, killed, repaired, served = int(ranking), int(killed), int(repaired), int(served)
    reads = [json.loads(line) for line in open(f"{out}/round-{victim}.jsonl") if line.strip()]
    after = [a for a in reads if a["due_ms"] >= killed]
    failed = [a for a in after if a["status"] != 200]
    latency = [a["latency_ms"] for a in after]
    stale = sum(1 for a in after if a["status"] == 200 and (a["replica"] or a["stale"]))
    share = 100.0 * stale / len(after) if after else 0.0
    print(f"{victim:11} {len(after):6} {len(failed):6} {p99(latency):7.0f} {max(latency, default=0):7.0f} "
          f"{share:7.1f} {(repaired - killed) / 1000:10.1f} {(served - killed) / 1000:9.1f} {ranker:>6}")
    before, during = cores(ranking - 10_000, ranking), cores(ranking, repaired + 5_000)
    if during:
        processes = sorted((set(before) | set(during)) - {"idle", "jit"}, key=lambda k: (k == "other", k))
        print("    CPU, cores, in the 10 s before the ranking run -> from it until 5 s after the repair "
              "(jit: the JVMs' compiler threads, a part of their figures): "
              + ", ".join(f"{k} {before.get(k, 0):.2f} -> {during.get(k, 0):.2f}"
                          for k in ["idle", "jit"] + processes))
    by_kind = {}
    for a in failed:
        by_kind.setdefault(a["route"], []).append(a)
    for kind, seen in sorted(by_kind.items()):
        last = max(a["due_ms"] + a["latency_ms"] for a in seen) - killed
        codes = sorted({str(a.get("code") or a["status"]) for a in seen})
        print(f"    {kind}: {len(seen)} failed ({', '.join(codes)}), the last ending {last / 1000:.1f} s after the kill")
    if failed:
        problems.append(f"{victim}: {len(failed)} of {len(after)} reads failed")
    if ranker != "0":
        problems.append(f"{victim}: the ranking run exited {ranker}")

before = json.load(open(f"{out}/before.json"))
after = json.load(open(f"{out}/after.json"))
differ = [path for path in before if before[path] != after.get(path)]
print(f"answers compared: {len(before)} (every product's ranked reviews, summary and whole latest list); "
      f"differing after the faults: {len(differ)}")
if differ:
    problems.append(f"{len(differ)} answers differ after the faults, e.g. {differ[:3]}")
total = 0
for line in memory.splitlines():
    name, rss = line.split()
    total += int(rss)
    print(f"memory {name:12} {int(rss) / 1024:7.0f} MiB")
    if int(rss) == 0:
        # Every victim was started again: a process gone now died of something else
        # (a region server whose ZooKeeper session expired on a starved machine, or
        # whose heap ran out), and the rounds after its death ran on a smaller
        # deployment than they say.
        problems.append(f"{name} is not running at the end, and no round left it dead{cause_of_death(name)}")
print(f"memory in all      {total / 1024:7.0f} MiB")
if problems:
    print("FAILED: " + "; ".join(problems))
    sys.exit(1)
print("passed")
PY
