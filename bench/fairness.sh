#!/usr/bin/env bash
# Fair shedding (BENCHMARKS.md, "Fair shedding"): one polite client reading
# product pages beside one greedy client, on the bench_ data (bench/load.sh).
#
# For each of `--fair-shedding true` and `--fair-shedding false` (paired in
# one run, the same build), a release query-api on its own port, then:
#
# 1. the polite reader alone: `page-load` at FAIRNESS_POLITE_RATE (20)
#    requests/s, the mix of a product page, from 127.0.0.1, for
#    FAIRNESS_DURATION_SECS (30);
# 2. the greedy client, `soak --rate FAIRNESS_GREEDY_RATE` (6000) from
#    127.0.0.2 (another client by address), and after FAIRNESS_WARMUP_SECS
#    (10) the polite reader again, beside it.
#
# FAIRNESS_SETTINGS limits the settings run (`true`, say); FAIRNESS_API_FLAGS
# adds query-api flags to both (`--client-rate 25`: the greedy client
# refused nearly always, which leaves what serving its refusals and running
# the load generator beside the service cost the polite reader).
#
# Prints, per setting, the polite reader's failures (answers other than 200
# and 304) and p99 alone and beside the greedy client, their ratio, and the
# share of the greedy client's requests refused with 429. Results land in
# bench/out/fairness/ (with each service's error and refusal counters).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/lib.sh
polite_rate=${FAIRNESS_POLITE_RATE:-20}
greedy_rate=${FAIRNESS_GREEDY_RATE:-6000}
duration=${FAIRNESS_DURATION_SECS:-30}
warmup=${FAIRNESS_WARMUP_SECS:-10}
port=${FAIRNESS_PORT:-18095}
out=bench/out/fairness
mkdir -p "$out"
build_release_binaries
hbase/hbasectl start >/dev/null
base="http://127.0.0.1:$port"
data=(--products 10000 --users 100000)
api_pid=""
greedy_pid=""
trap 'for pid in "$api_pid" "$greedy_pid"; do [ -n "$pid" ] && kill -TERM "$pid" 2>/dev/null; done; wait 2>/dev/null || true' EXIT

polite() {
  "$BIN/page-load" --base "$base" "${data[@]}" --rate "$polite_rate" --duration-secs "$duration" \
    --local-address 127.0.0.1 --out "$1" 2>/dev/null
}

settings=${FAIRNESS_SETTINGS:-true false}
for shedding in $settings; do
  # shellcheck disable=SC2086 # FAIRNESS_API_FLAGS is a list of flags.
  start_query_api "$port" "$out/query-api-$shedding.log" --table-prefix bench_ --fair-shedding "$shedding" \
    ${FAIRNESS_API_FLAGS:-}
  polite "$out/polite-alone-$shedding.jsonl"
  "$BIN/soak" --base "$base" "${data[@]}" --rate "$greedy_rate" --duration-secs $((warmup + duration + 5)) \
    --window-secs $((warmup + duration + 5)) --local-address 127.0.0.2 --report-only \
    >"$out/greedy-$shedding.txt" 2>&1 &
  greedy_pid=$!
  sleep "$warmup"
  polite "$out/polite-beside-$shedding.jsonl"
  wait "$greedy_pid" || true
  curl -fsS "$base/metrics" | grep -E '^reviews_api_(http_errors|client_refusals)_total' >"$out/metrics-$shedding.txt" || true
  greedy_pid=""
  kill -TERM "$api_pid"
  wait "$api_pid" 2>/dev/null || true
  api_pid=""
done

python3 - "$out" "$settings" <<'PY'
import json, re, sys
out = sys.argv[1]

def polite(name):
    lines = [json.loads(line) for line in open(f"{out}/{name}.jsonl")]
    latencies = sorted(line["latency_ms"] for line in lines)
    failed = sum(line["status"] not in (200, 304) for line in lines)
    p99 = latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))]
    return failed, len(lines), p99

for shedding in sys.argv[2].split():
    alone_failed, alone_count, alone_p99 = polite(f"polite-alone-{shedding}")
    beside_failed, beside_count, beside_p99 = polite(f"polite-beside-{shedding}")
    total = open(f"{out}/greedy-{shedding}.txt").read()
    match = re.search(r"total: (\d+) answered .*?\((\d+) req/s held.*?4xx \d+ \(429 (\d+)\), 5xx (\d+)", total)
    answered, held, refused, errors = (int(group) for group in match.groups())
    print(f"--fair-shedding {shedding}:")
    print(f"  polite reader alone:        {alone_failed} of {alone_count} failed, p99 {alone_p99:.1f} ms")
    print(f"  polite reader beside greedy: {beside_failed} of {beside_count} failed, p99 {beside_p99:.1f} ms "
          f"({beside_p99 / alone_p99:.1f}x alone)")
    print(f"  greedy client: {held} req/s held, {refused} of {answered} refused with 429 "
          f"({100 * refused / max(answered, 1):.0f} %), {errors} answered 5xx")
PY
