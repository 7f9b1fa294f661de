#!/usr/bin/env bash
# Fair shares (BENCHMARKS.md, "Fair shares"; the rule is docs/pacing.md):
# polite readers of every kind beside a flood, beside crowds, alone, with
# shedding on and off, in rounds.
#
# Each round, for each of `--fair-shedding true` and `false` (their order
# alternating by round, so neither always runs first), a release query-api
# on its own port serves, for each condition in turn:
#
# - alone:   the polite readers and nothing else;
# - flood:   one greedy client, `soak --rate 6000` from 127.0.0.2;
# - crowd10: ten clients at 600 req/s each (one `soak --rate 6000` sending
#            from 127.0.2.1..10 in turn);
# - crowd50: fifty clients at 120 req/s each (127.0.3.1..50);
# - crowd50-elsewhere: the same fifty clients sent to the anchor
#            (bench/src/bin/anchor.rs, answering each a 404 and doing nothing
#            else) on this machine instead: what the crowd costs the readers
#            when the service never sees it (its load generator's CPU, the
#            kernel's), the floor any rule in the service can reach here.
#
# A new service's readers first read FAIRNESS_WARMUP_SECS (5) unmeasured,
# its caches being cold. Then for each condition the readers read, all at
# once, each at FAIRNESS_POLITE_RATE (20) requests/s from its own address
# (127.0.1.N), with `page-load`; after FAIRNESS_LEAD_SECS (2, unmeasured) a
# flood comes, as it would while shoppers read, and the readers are measured
# from then on for FAIRNESS_DURATION_SECS (20), the flood's first moments
# included. The readers:
#
#   page            a product page's mix (ranked, summary, latest, a user's
#                   timeline, a second page), on keep-alive connections;
#   page-new        the same, every request on a new connection;
#   timelines       user timelines, new connections;
#   filtered        one-star pages and pages by rating, new connections;
#   walk            first pages and the pages after them (cursors), new connections;
#   listing         listing pages' /v1/summaries of twelve products, new connections;
#   html            the server-rendered reviews.html, new connections.
#
# FAIRNESS_DATA is `bench` (the bench_ tables, bench/load.sh; the default) or
# `demo` (the demo's tables, loaded and ranked here if missing, as
# scripts/demo.sh does). FAIRNESS_ROUNDS (5), FAIRNESS_SETTINGS ("true
# false"), FAIRNESS_CONDITIONS ("alone flood crowd10 crowd50
# crowd50-elsewhere") and FAIRNESS_READERS (all seven) narrow the run;
# FAIRNESS_API_FLAGS adds query-api flags to every service;
# FAIRNESS_GREEDY_RATE (6000) is what the greedy clients ask together, so a
# crowd asking less (within its share: 500 is ten a second each of fifty)
# shows what serving others costs the readers on this machine.
#
# Prints, per round, setting and condition, each reader's failures (answers
# other than 200 and 304, and requests that got none) and p99, with the p99
# over the same reader's alone in that round and setting; and the greedy
# clients' answers a second that were not refused, and their 429s and 5xx;
# the service's HBase calls and their mean time; how many HBase operations
# found no connection free and waited, and how long on average, of the
# clients within their fair share while the service shed (`lifted`) and of
# the others (`held`); the requests admitted, by kind (every client's:
# readers and greedy clients are all told apart by address; `calm` while
# the service did not shed, `sheltered`, `within`, `room`, `newcomer`:
# query-api/README.md); the seconds whose admitted requests overflowed
# (docs/pacing.md: each lowers what the shares are worked out from, and its
# time is in the service's log); and the cores each
# process used meanwhile (scripts/cpu-sampler.py: HBase's by their pid
# files, query-api, page-load for the readers, soak for the greedy clients,
# `other`, the machine's `idle`).
# Everything lands in bench/out/fairness/ (each service's refusal and error
# counters too); summary.json holds the table.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/lib.sh
polite_rate=${FAIRNESS_POLITE_RATE:-20}
greedy_rate=${FAIRNESS_GREEDY_RATE:-6000}
duration=${FAIRNESS_DURATION_SECS:-20}
warmup=${FAIRNESS_WARMUP_SECS:-5}
lead=${FAIRNESS_LEAD_SECS:-2}
rounds=${FAIRNESS_ROUNDS:-5}
port=${FAIRNESS_PORT:-18095}
data=${FAIRNESS_DATA:-bench}
settings=${FAIRNESS_SETTINGS:-true false}
conditions=${FAIRNESS_CONDITIONS:-alone flood crowd10 crowd50 crowd50-elsewhere}
readers=${FAIRNESS_READERS:-page page-new timelines filtered walk listing html}
out=bench/out/fairness
rm -rf "$out"
mkdir -p "$out"
build_release_binaries
hbase/hbasectl start >/dev/null
# Where the machine's CPU goes in each condition: HBase's processes by their
# pid files, the service, the readers (page-load) and the greedy clients (soak).
python3 scripts/cpu-sampler.py "${HBASE_RUN_DIR:-hbase/run}" "$out/cpu.csv" &
sampler_pid=$!
case "$data" in
  bench)
    prefix=(--table-prefix bench_)
    ids=(--products 10000 --users 100000)
    ;;
  demo)
    prefix=()
    ids=(--products 200 --users 2000)
    # What scripts/demo.sh does; both recognise data already there.
    "$BIN/reviews-admin" schema create --regions 4 >/dev/null
    "$BIN/reviews-admin" demo load --users 2000 --products 200 --comments 20000 >/dev/null
    "$BIN/ranker" run >/dev/null
    ;;
  *) echo "FAIRNESS_DATA is bench or demo, not $data" >&2; exit 2 ;;
esac
base="http://127.0.0.1:$port"
elsewhere="http://127.0.0.1:$((port + 1))"
echo '{}' >"$out/anchor-body"
"$BIN/anchor" --listen "127.0.0.1:$((port + 1))" --body "$out/anchor-body" >"$out/anchor.log" 2>&1 &
anchor_pid=$!
api_pid=""
greedy_pid=""
polite_pids=()
# A reader that already finished cannot be killed, and under `set -e` a
# failed kill would end a complete run with status 1.
trap 'for pid in "$sampler_pid" "$anchor_pid" "$api_pid" "$greedy_pid" "${polite_pids[@]}"; do [ -n "$pid" ] && { kill -TERM "$pid" 2>/dev/null || true; }; done; wait 2>/dev/null || true' EXIT

# pool_waits NAME: the service's HBase pool waits, its HBase calls' times,
# its admissions by kind and its overflowed seconds so far (cumulative since
# it started), to $out/pool-wait-NAME.txt.
pool_waits() {
  curl -fsS "$base/metrics" | grep -E '^reviews_(hbase_(pool_wait|call)_seconds|api_(client_admissions|overflowed_seconds)_total)' \
    >"$out/pool-wait-$1.txt" || true
}

# The routes and connection mode of each reader, and its address.
reader_flags() {
  case "$1" in
    page) echo "--routes ranked,summary,latest,user,next-page" ;;
    page-new) echo "--routes ranked,summary,latest,user,next-page --new-connections" ;;
    timelines) echo "--routes user --new-connections" ;;
    filtered) echo "--routes star,rating-order --new-connections" ;;
    walk) echo "--routes latest,next-page --new-connections" ;;
    listing) echo "--routes summaries --new-connections" ;;
    html) echo "--routes html --new-connections" ;;
    *) echo "unknown reader $1" >&2; return 1 ;;
  esac
}

# polite NAME SECONDS: every reader at once for SECONDS, each to
# $out/NAME-READER.jsonl, in the background (their pids in polite_pids).
polite() {
  local number=0 reader
  polite_pids=()
  for reader in $readers; do
    number=$((number + 1))
    # shellcheck disable=SC2046 # reader_flags prints a list of flags.
    "$BIN/page-load" --base "$base" "${ids[@]}" --rate "$polite_rate" --duration-secs "$2" \
      --local-address "127.0.1.$number" --seed "$number" $(reader_flags "$reader") \
      --out "$out/$1-$reader.jsonl" 2>/dev/null &
    polite_pids+=($!)
  done
}

# wait_readers: waits for every reader; one that failed is said, not fatal.
wait_readers() {
  local pid
  for pid in "${polite_pids[@]}"; do
    wait "$pid" || echo "a reader (pid $pid) failed" >&2
  done
}

# The greedy clients' addresses of a condition.
addresses() {
  case "$1" in
    flood) echo 127.0.0.2 ;;
    crowd10) seq -s, -f '127.0.2.%g' 1 10 ;;
    crowd50 | crowd50-elsewhere) seq -s, -f '127.0.3.%g' 1 50 ;;
  esac
}

for round in $(seq 1 "$rounds"); do
  order=$settings
  [ $((round % 2)) -eq 0 ] && order=$(echo "$settings" | tr ' ' '\n' | tac | tr '\n' ' ')
  for shedding in $order; do
    # shellcheck disable=SC2086 # FAIRNESS_API_FLAGS is a list of flags.
    start_query_api "$port" "$out/query-api-$round-$shedding.log" "${prefix[@]}" \
      --fair-shedding "$shedding" ${FAIRNESS_API_FLAGS:-}
    # A new service's caches are cold and its first answers slow: the
    # readers read for a while unmeasured first, so "alone" is a warm one.
    polite "warm-$round-$shedding" "$warmup"
    wait_readers
    pool_waits "$round-$shedding-warm"
    for condition in $conditions; do
      name="$round-$shedding-$condition"
      polite "$name" $((lead + duration))
      sleep "$lead"
      if [ "$condition" != alone ]; then
        greedy_base=$base
        [ "$condition" = crowd50-elsewhere ] && greedy_base=$elsewhere
        "$BIN/soak" --base "$greedy_base" "${ids[@]}" --rate "$greedy_rate" --max-in-flight 1024 \
          --duration-secs $((duration + 1)) --window-secs $((duration + 1)) \
          --local-address "$(addresses "$condition")" --report-only >"$out/$name-greedy.txt" 2>&1 &
        greedy_pid=$!
      fi
      wait_readers
      if [ -n "$greedy_pid" ]; then
        wait "$greedy_pid" || true
        greedy_pid=""
      fi
      # A condition's own waits are its file less the one before (the warm-up's, for the first).
      pool_waits "$name"
      echo "round $round, --fair-shedding $shedding, $condition: done" >&2
    done
    curl -fsS "$base/metrics" | grep -E '^reviews_api_(http_errors|client_refusals)_total' \
      >"$out/metrics-$round-$shedding.txt" || true
    kill -TERM "$api_pid"
    wait "$api_pid" 2>/dev/null || true
    api_pid=""
  done
done

python3 - "$out" "$rounds" "$settings" "$conditions" "$readers" "$duration" "$lead" <<'PY'
import json, os, re, sys
sys.path.insert(0, "scripts")
import cpu_samples
out, rounds, settings, conditions, readers, duration, lead = sys.argv[1:]
rounds, duration, lead = int(rounds), int(duration), int(lead)
settings, conditions, readers = settings.split(), conditions.split(), readers.split()

def reader(name):
    lines = [json.loads(line) for line in open(f"{out}/{name}.jsonl")]
    # The readers' first seconds, before a flood comes, are not measured.
    start = min((line["due_ms"] for line in lines), default=0) + 1000 * lead
    lines = [line for line in lines if line["due_ms"] >= start]
    latencies = sorted(line["latency_ms"] for line in lines) or [0.0]
    failed = sum(line["status"] not in (200, 304) for line in lines)
    measured_ms = [start, max(line["due_ms"] for line in lines)] if lines else None
    return {"failed": failed, "count": len(lines), "p99": latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))],
            "measured_ms": measured_ms}

def greedy(name):
    path = f"{out}/{name}-greedy.txt"
    if not os.path.exists(path):
        return None
    match = re.search(r"total: (\d+) answered .*?2xx/3xx (\d+), 4xx \d+ \(429 (\d+)\), 5xx (\d+), no answer (\d+)",
                      open(path).read())
    if not match:
        return None
    answered, ok, refused, errors, none = (int(group) for group in match.groups())
    # soak runs a second longer than the readers.
    return {"served_per_s": ok / (duration + 1), "answered": answered, "refused": refused, "errors": errors, "no_answer": none}

def cores(seen):
    """The cores each process used while the readers `seen` ({reader: reader(...)}) were measured."""
    windows = [r["measured_ms"] for r in seen.values() if r["measured_ms"]]
    if not windows:
        return {}
    return cpu_samples.cores(samples, min(start for start, _ in windows), max(end for _, end in windows))

def pool_waits(name):
    """The HBase pool's waits so far, {queue_bound: [count, seconds]}; the
    calls to HBase, [count, seconds] (every operation summed); the
    admissions by kind, {kind: count} (every class summed); and the seconds
    whose admitted requests overflowed."""
    waits, calls, admissions, overflowed = {}, [0, 0.0], {}, 0.0
    path = f"{out}/pool-wait-{name}.txt"
    for line in open(path) if os.path.exists(path) else []:
        match = re.match(r'reviews_hbase_pool_wait_seconds_(count|sum)\{queue_bound="(\w+)"\} (\S+)', line)
        if match:
            part, bound, value = match.groups()
            waits.setdefault(bound, [0, 0.0])[0 if part == "count" else 1] = float(value)
        match = re.match(r'reviews_hbase_call_seconds_(count|sum)\{.*\} (\S+)', line)
        if match:
            calls[0 if match.group(1) == "count" else 1] += float(match.group(2))
        match = re.match(r'reviews_api_client_admissions_total\{.*kind="(\w+)".*\} (\S+)', line)
        if match:
            admissions[match.group(1)] = admissions.get(match.group(1), 0) + float(match.group(2))
        match = re.match(r'reviews_api_overflowed_seconds_total (\S+)', line)
        if match:
            overflowed = float(match.group(1))
    return waits, calls, admissions, overflowed

samples = cpu_samples.read(f"{out}/cpu.csv")
table = []
for round in range(1, rounds + 1):
    for shedding in settings:
        alone = {r: reader(f"{round}-{shedding}-alone-{r}") for r in readers} if "alone" in conditions else {}
        before, calls_before, admitted_before, overflowed_before = pool_waits(f"{round}-{shedding}-warm")
        for condition in conditions:
            name = f"{round}-{shedding}-{condition}"
            row = {"round": round, "shedding": shedding, "condition": condition, "readers": {}, "greedy": greedy(name)}
            after, calls, admitted, overflowed = pool_waits(name)
            row["pool_waits"] = {bound: [count - before.get(bound, [0, 0.0])[0], seconds - before.get(bound, [0, 0.0])[1]]
                                 for bound, (count, seconds) in after.items()}
            row["hbase_calls"] = [calls[0] - calls_before[0], calls[1] - calls_before[1]]
            row["admissions"] = {kind: count - admitted_before.get(kind, 0) for kind, count in admitted.items()}
            row["overflowed_seconds"] = int(overflowed - overflowed_before)
            before, calls_before, admitted_before, overflowed_before = after, calls, admitted, overflowed
            for r in readers:
                seen = reader(f"{name}-{r}")
                if r in alone and alone[r]["p99"] > 0:
                    seen["p99_over_alone"] = seen["p99"] / alone[r]["p99"]
                row["readers"][r] = seen
            row["cores"] = cores(row["readers"])
            table.append(row)
json.dump(table, open(f"{out}/summary.json", "w"), indent=1)

for row in table:
    print(f"round {row['round']}, --fair-shedding {row['shedding']}, {row['condition']}:")
    cells = []
    for r, seen in row["readers"].items():
        ratio = f" ({seen['p99_over_alone']:.1f}x)" if "p99_over_alone" in seen and row["condition"] != "alone" else ""
        cells.append(f"{r} {seen['failed']}/{seen['count']} p99 {seen['p99']:.0f}{ratio}")
    print("  readers (failed/sent, p99 ms): " + "; ".join(cells))
    if row["greedy"] and row["condition"].endswith("-elsewhere"):
        print(f"  greedy (at the anchor): {row['greedy']['answered'] / (duration + 1):.0f} answered/s")
    elif row["greedy"]:
        g = row["greedy"]
        print(f"  greedy: {g['served_per_s']:.0f} served/s, {g['refused']} refused (429), {g['errors']} 5xx, "
              f"{g['no_answer']} unanswered")
    # `lifted`: operations of clients within their fair share while the
    # service sheds; `held`: every other.
    calls = row["hbase_calls"]
    if calls[0] > 0:
        print(f"  HBase calls: {int(calls[0])}, mean {1000 * calls[1] / calls[0]:.1f} ms")
    waits = [f"{bound} {int(count)}, mean {1000 * seconds / count:.0f} ms"
             for bound, (count, seconds) in sorted(row["pool_waits"].items()) if count > 0]
    if waits:
        print("  HBase operations that waited for a connection: " + "; ".join(waits))
    # Every client's, readers' and greedy clients' alike (all are `address`).
    admitted = [f"{kind} {int(count)}" for kind, count in sorted(row["admissions"].items(), key=lambda item: -item[1])
                if count > 0]
    if admitted:
        print("  admitted, by kind: " + ", ".join(admitted))
    # Each lowers what the fair shares are worked out from (docs/pacing.md).
    if row["overflowed_seconds"]:
        print(f"  seconds whose admitted requests overflowed: {row['overflowed_seconds']}")
    # `jit`: the JVMs' compiler threads, counted in their JVMs' figures too.
    used = [f"{process} {share:.2f}" for process, share in sorted(row["cores"].items(), key=lambda item: -item[1])
            if share >= 0.02]
    if used:
        print("  cores: " + ", ".join(used))
# The targets, over every round: polite failures, the worst p99 ratio, and
# what the greedy clients keep with shedding on against off.
for condition in conditions:
    rows = [row for row in table if row["condition"] == condition]
    for shedding in settings:
        mine = [row for row in rows if row["shedding"] == shedding]
        failed = sum(seen["failed"] for row in mine for seen in row["readers"].values())
        ratios = [seen["p99_over_alone"] for row in mine for seen in row["readers"].values() if "p99_over_alone" in seen]
        worst = f", worst p99 {max(ratios):.1f}x alone" if condition != "alone" and ratios else ""
        print(f"{condition}, shedding {shedding}: {failed} polite failures over {len(mine)} rounds{worst}")
    # The crowd at the anchor is served by neither setting.
    if condition != "alone" and not condition.endswith("-elsewhere") and {"true", "false"} <= set(settings):
        kept = []
        for round in range(1, rounds + 1):
            on = next(row["greedy"] for row in rows if row["round"] == round and row["shedding"] == "true")
            off = next(row["greedy"] for row in rows if row["round"] == round and row["shedding"] == "false")
            if on and off and off["served_per_s"] > 0:
                kept.append(on["served_per_s"] / off["served_per_s"])
        print(f"{condition}: the greedy clients served with shedding on over off, by round: "
              + ", ".join(f"{ratio:.2f}" for ratio in kept))
PY
