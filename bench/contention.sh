#!/usr/bin/env bash
# The contention benchmark (BENCHMARKS.md, "Readers while the ranker runs"): do online
# reads keep their latency while the nightly ranking runs?
#
# On the bench_ data set (bench/load.sh; loaded here first when missing) it
# starts the release query-api on the bench_ tables and holds it at an
# open-loop rate of mixed routes (soak, 10-s windows), REST seconds at rest,
# then runs `ranker run` with its defaults (one HBase call in flight, a fixed --as-of)
# and keeps the load on for TAIL seconds after the ranker ends. Then the same
# with `ranker run --pace off`. Then, with no readers, an unpaced `ranker run
# --pace off` and a `ranker bench-read`, for the wall-time and throughput
# ratios of the targets. About 12 minutes.
#
# Prints, per phase: the p50/p99 of every window, shed and 5xx counts,
# query-api's RSS, the GC pauses of the region server and the Thrift gateway
# in it, the ranker's wall time, mean rate; then the
# targets' figures. Writes everything to bench/out/contention/ and the plot of
# p99 over time (both runs on one chart) to bench/contention-p99.png
# (with matplotlib: scripts/lib.sh's plot_python installs it into
# target/plot-venv on first use, or set PLOT_PYTHON).
#
# Environment: CONTENTION_RATE (req/s, default 500), CONTENTION_REST_SECS
# (default 180), CONTENTION_TAIL_SECS (default 30), CONTENTION_PORT (default
# 18090), REVIEWS_THRIFT_ADDR (default 127.0.0.1:9090), PLOT_PYTHON (default
# target/plot-venv's), CONTENTION_PHASES (default "paced unpaced idle"; a subset runs only
# those, and the summary covers what ran). Stays out of CI: it needs the
# 1,000,000-comment data set and a quiet machine.
#
# The deployment of deploy/README.md ("Batch traffic through a gateway of
# its own"): CONTENTION_BATCH_GATEWAY=PORT starts a second Thrift gateway on
# PORT for the ranker alone (query-api keeps REVIEWS_THRIFT_ADDR), and
# CONTENTION_BATCH_NICE=N runs the ranker and that gateway at nice N, standing
# in on this one machine for the batch host's own CPU (in production the ranker
# and its gateway run on hosts of their own; what stays shared is the region
# server). Both unset by default: the issue's setup, one gateway, one priority.
# CONTENTION_RANKER_FLAGS adds flags to every ranker run, for experiments. CONTENTION_WARM_RANKER=0
# skips the unpaced warm-up run (see below). CONTENTION_RANKER=PATH runs that
# ranker binary instead of the release build, to compare two builds of it on
# one HBase in one sitting (keep a copy of the older build's target/release/ranker).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/lib.sh

RATE="${CONTENTION_RATE:-500}"
# At rest long enough for query-api's caches to fill: at 500 req/s its RSS
# climbs from about 60 to about 245 MiB in the first two minutes (the ranked
# cache and the last good copies, both bounded) and then stays flat, and the
# rest figures are its last 30 s.
REST="${CONTENTION_REST_SECS:-180}"
TAIL="${CONTENTION_TAIL_SECS:-30}"
PORT="${CONTENTION_PORT:-18090}"
THRIFT_ADDR="${REVIEWS_THRIFT_ADDR:-127.0.0.1:9090}"
PHASES="${CONTENTION_PHASES:-paced unpaced idle}"
BATCH_GATEWAY="${CONTENTION_BATCH_GATEWAY:-}"
BATCH_NICE="${CONTENTION_BATCH_NICE:-0}"
AS_OF=1793491200000
OUT=bench/out/contention
# hbasectl's run dir (its default when HBASE_RUN_DIR is unset): the report
# reads the JVMs' GC logs and the served tables from it.
HBASE_RUN="${HBASE_RUN_DIR:-hbase/run}"
# A mistyped CONTENTION_RANKER must stop the script before anything starts:
# the data-set check below would read its failure as a missing data set.
if [[ -n "${CONTENTION_RANKER:-}" && ! -x "$CONTENTION_RANKER" ]]; then
  echo "contention: CONTENTION_RANKER=$CONTENTION_RANKER is not an executable file" >&2
  exit 2
fi
mkdir -p "$OUT"

hbase/hbasectl start
# The region server keeps metrics (latency histograms among them) for every
# table it serves, and its young GCs copy the live ones; tables left behind by
# killed test runs made its pauses longer (git show 53d5a2e:BENCHMARKS.md, "Rounds 20 to 24").
# So the tables besides bench_ are counted, and the figures say when there were any.
other_tables=$(find "$HBASE_RUN/data/hbase/data/default" -mindepth 1 -maxdepth 1 ! -name 'bench_*' 2>/dev/null | wc -l)
echo "contention: HBase serves $other_tables tables besides the bench_ ones"
build_release_binaries
RANKER="${CONTENTION_RANKER:-$BIN/ranker}"
hbase_flags=(--thrift-addr "$THRIFT_ADDR" --table-prefix bench_)
# The ranker's HBase flags and its command prefix: the batch gateway and
# niceness when asked for.
ranker_flags=("${hbase_flags[@]}")
read -r -a extra_ranker_flags <<<"${CONTENTION_RANKER_FLAGS:-}"
batch=(nice -n "$BATCH_NICE")
if [[ -n "$BATCH_GATEWAY" ]]; then
  "${batch[@]}" hbase/hbasectl start-gateway "$BATCH_GATEWAY"
  ranker_flags=(--thrift-addr "127.0.0.1:$BATCH_GATEWAY" --table-prefix bench_)
fi
ranker_flags+=("${extra_ranker_flags[@]}")
echo "contention: phases: $PHASES; ranker ${ranker_flags[*]} at nice $BATCH_NICE; query-api via $THRIFT_ADDR"

# The data set: bench/load.sh writes it once; a bench-read over it says whether it is there.
if ! "$RANKER" bench-read "${hbase_flags[@]}" --product P000000001 --json >"$OUT/probe.json" 2>/dev/null ||
  ! python3 -c 'import json,sys; sys.exit(0 if json.load(open(sys.argv[1]))["comments_scored"] >= 100000 else 1)' "$OUT/probe.json"; then
  echo "contention: the bench_ data set is missing; loading it with bench/load.sh (about two minutes)"
  bench/load.sh
fi

# The tables' block encodings, for the record: a data set loaded before the
# tables got a row index in each data block lacks it, and that made the
# region server walk each block to find a row (git show 53d5a2e:BENCHMARKS.md, "Rounds 56 and
# 57"); `reviews-admin schema upgrade --table-prefix bench_` adds it to blocks
# written from then on, and the HBase shell's `major_compact` to the older ones.
"$BIN/reviews-admin" schema create "${hbase_flags[@]}" | tee "$OUT/schema.txt"

api_pid=
soak_pid=
cleanup() {
  [[ -n "$soak_pid" ]] && kill -TERM "$soak_pid" 2>/dev/null
  [[ -n "$api_pid" ]] && kill -TERM "$api_pid" 2>/dev/null && wait "$api_pid" 2>/dev/null
  [[ -n "$BATCH_GATEWAY" ]] && hbase/hbasectl stop-gateway "$BATCH_GATEWAY"
  true
}
trap cleanup EXIT

# One phase: query-api under load, the ranker (with extra flags) after REST s.
phase() {
  local name=$1
  shift
  echo "contention: phase $name: query-api at $RATE req/s, ranker $* after ${REST} s"
  RUST_LOG=warn start_query_api "$PORT" "$OUT/$name-api.log" "${hbase_flags[@]}"
  local started
  started=$(date +%s.%N)
  # Longer than any run; stopped after the tail. Each window is flushed as it ends.
  "$BIN/soak" --base "http://127.0.0.1:$PORT" --pid "$api_pid" --rate "$RATE" --window-secs 10 \
    --duration-secs 1800 --products 10000 --users 100000 --report-only \
    --windows-json "$OUT/$name-windows.jsonl" >"$OUT/$name-soak.txt" 2>&1 &
  soak_pid=$!
  sleep "$REST"
  local ranker_start ranker_end
  ranker_start=$(date +%s.%N)
  "${batch[@]}" "$RANKER" run "${ranker_flags[@]}" --as-of "$AS_OF" --json "$@" >"$OUT/$name-ranker.json" 2>"$OUT/$name-ranker.log"
  ranker_end=$(date +%s.%N)
  sleep "$TAIL"
  # Let the window in progress end and be written.
  sleep 11
  kill -TERM "$soak_pid" 2>/dev/null || true
  wait "$soak_pid" 2>/dev/null || true
  soak_pid=
  kill -TERM "$api_pid"
  wait "$api_pid" || true
  api_pid=
  # The load's start in Unix seconds too, so the report can place the region
  # server's GC pauses (logged with wall-clock times) in the soak's windows.
  python3 -c 'import json, sys; s, a, b = map(float, sys.argv[1:]); print(json.dumps({"start_secs": round(a - s, 3), "end_secs": round(b - s, 3), "load_started_unix": s}))' \
    "$started" "$ranker_start" "$ranker_end" >"$OUT/$name-timeline.json"
}

# Every phase should meet a warm block cache, as a long-running HBase has:
# right after a restart the readers alone answered 503 at rest (a p99 of
# 189 ms), and the first phase measured the cold cache, not the ranker. One
# unpaced read pass over every product's comments warms it (the data set,
# about 700 MB on disk, fits the 1.2-GB block cache of hbasectl's 3-GB heap).
echo "contention: warming HBase's block cache (ranker bench-read)"
"$RANKER" bench-read "${hbase_flags[@]}" --json >"$OUT/warm-up.json" 2>"$OUT/warm-up.log"
# And the JVMs' compiled code, as a long-running HBase has it: on JVMs just
# started, the ranker's first calls down paths the readers never take (its
# slot writes, the lease's checkAndPut) made the region server compile over
# 600 methods in two seconds and the gateway recompile its mutateRows path
# later on, each burst taking the two cores from the readers for a stall of
# a few hundred ms (git show 53d5a2e:BENCHMARKS.md, contention round 9). One unpaced run before
# the phases takes that cost where no reader measures it.
# CONTENTION_WARM_RANKER=0 skips it, to measure a first run on fresh JVMs.
if [[ "${CONTENTION_WARM_RANKER:-1}" != 0 ]]; then
  echo "contention: warming the JVMs' code paths (ranker run --pace off)"
  "$RANKER" run "${hbase_flags[@]}" --pace off --as-of "$AS_OF" --json >"$OUT/warm-up-run.json" 2>"$OUT/warm-up-run.log"
fi

# Results of an earlier invocation must not pass for this one's.
for stale in paced unpaced idle; do
  rm -f "$OUT/$stale"-*
done
for wanted in $PHASES; do
  case "$wanted" in
    paced) phase paced ;;
    unpaced) phase unpaced --pace off ;;
    idle)
      echo "contention: idle HBase: ranker run --pace off, then ranker bench-read"
      "${batch[@]}" "$RANKER" run "${ranker_flags[@]}" --as-of "$AS_OF" --json --pace off \
        >"$OUT/idle-unpaced-ranker.json" 2>"$OUT/idle-unpaced-ranker.log"
      "${batch[@]}" "$RANKER" bench-read "${ranker_flags[@]}" --json >"$OUT/idle-bench-read.json" 2>"$OUT/idle-bench-read.log"
      ;;
    *) echo "contention: unknown phase '$wanted' in CONTENTION_PHASES (paced, unpaced, idle)" >&2 && exit 2 ;;
  esac
done

# The JVMs' GC logs (hbasectl writes them to its run dir's logs/), for the
# report's pause columns.
python3 - "$OUT" "$REST" "$HBASE_RUN/logs" <<'PY'
import glob, json, os, re, statistics, sys
from datetime import datetime
out, rest, hbase_logs = sys.argv[1], float(sys.argv[2]), sys.argv[3]

# A young-generation pause of the region server stops every reader's call for
# its length (21 to 106 ms during the runs of rounds 20 to 24, git show 53d5a2e:BENCHMARKS.md),
# and the run's reads make them come more often. So each window is shown with
# the stop-the-world pauses it held, of the region server (the master JVM:
# standalone HBase) and of query-api's Thrift gateway, to tell what a pause did
# from what the run's calls did.
PAUSE = re.compile(r"^\[([^\]]+)\].*\bPause .* ([0-9.]+)ms$")

def gc_pauses(jvm):
    """(start, end, ms) in Unix seconds of every pause the JVM's GC log holds."""
    pauses = []
    for path in glob.glob(f"{hbase_logs}/{jvm}-gc.log*"):
        for line in open(path, errors="replace"):
            match = PAUSE.match(line.strip())
            if match:
                # G1 logs a pause when it ends.
                end = datetime.strptime(match.group(1), "%Y-%m-%dT%H:%M:%S.%f%z").timestamp()
                ms = float(match.group(2))
                pauses.append((end - ms / 1000, end, ms))
    return pauses

pauses_of = {"rs": gc_pauses("master"), "gateway": gc_pauses("thrift")}

def pauses_in(window, timeline, jvm):
    """The pauses (ms) of the JVM that overlap the window (10 s ending at its end_secs)."""
    end = timeline["load_started_unix"] + window["end_secs"]
    return [ms for (a, b, ms) in pauses_of[jvm] if b > end - 10 and a < end]

def shown(pauses):
    return "+".join(f"{ms:.0f}" for ms in pauses) or "-"

def load(name):
    windows = [json.loads(line) for line in open(f"{out}/{name}-windows.jsonl")]
    timeline = json.load(open(f"{out}/{name}-timeline.json"))
    report = json.load(open(f"{out}/{name}-ranker.json"))
    return windows, timeline, report

summary = {}
for name in ("paced", "unpaced"):
    if not os.path.exists(f"{out}/{name}-timeline.json"):
        continue
    windows, timeline, report = load(name)
    start, end = timeline["start_secs"], timeline["end_secs"]
    # At rest: the windows of the last 30 s before the ranker (the first ones warm up).
    at_rest = [w for w in windows if w["end_secs"] <= start and w["end_secs"] > rest - 30]
    during = [w for w in windows if w["end_secs"] > start and w["end_secs"] - 10 < end]
    rest_p99 = statistics.median(w["p99_ms"] for w in at_rest)
    worst_window = max(during, key=lambda w: w["p99_ms"])
    worst = worst_window["p99_ms"]
    # Each window's region-server pauses, looked up once for the table and the counts below.
    rs_pauses = {w["window"]: pauses_in(w, timeline, "rs") for w in windows}
    rss_rest = at_rest[-1]["rss_kib"] / 1024
    rss_peak = max(w["rss_kib"] for w in during) / 1024
    print(f"\n{name}: ranker from {start:.0f} s to {end:.0f} s ({report['duration_ms'] / 1000:.1f} s), "
          f"mean {report['pacing']['mean_rate']:,.0f} comments/s, "
          f"{report['products_ranked']} products, {len(report['failures'])} failures")
    print("  window  end s   p50 ms   p99 ms   max ms  5xx  shed  rss MiB  phase   rs GC pauses ms  gateway GC ms")
    for w in windows:
        phase = "ranker" if w in during else ("rest" if w in at_rest else "")
        print(f"  {w['window']:>6}  {w['end_secs']:>5}  {w['p50_ms']:>7.1f}  {w['p99_ms']:>7.1f}  {w['max_ms']:>7.1f}"
              f"  {w['server_errors'] + w['no_answer']:>3}  {w['shed']:>4}  {w['rss_kib'] / 1024:>7.1f}  {phase:<6}"
              f"  {shown(rs_pauses[w['window']]):>15}  {shown(pauses_in(w, timeline, 'gateway')):>13}")
    shed = sum(w["shed"] for w in during)
    errors = sum(w["server_errors"] + w["no_answer"] for w in during)
    print(f"  at rest: median p99 {rest_p99:.1f} ms; during the run: worst p99 {worst:.1f} ms "
          f"({worst / rest_p99:.1f}x rest), shed {shed}, 5xx/no answer {errors}, "
          f"RSS {rss_rest:.1f} MiB at rest, peak {rss_peak:.1f} MiB ({(rss_peak / rss_rest - 1) * 100:+.1f} %)")
    # What the pauses alone do: the run's worst window beside every window
    # before the run (past the first, which warms up) that held a region-server pause.
    worst_window_pauses = rs_pauses[worst_window["window"]]
    before_with_pause = [w["p99_ms"] for w in windows if 10 < w["end_secs"] <= start and rs_pauses[w["window"]]]
    rs_paused_during = sum(1 for w in during if rs_pauses[w["window"]])
    print(f"  region-server GC: {rs_paused_during} of {len(during)} run windows held a pause; the worst held "
          f"{shown(worst_window_pauses)} ms; windows before the run that held one: p99 "
          f"{', '.join(f'{p:.1f}' for p in before_with_pause) or 'none'} ms")
    summary[name] = {"rest_p99_ms": rest_p99, "worst_p99_ms": worst, "shed": shed, "errors": errors,
                     "worst_window_rs_pauses_ms": worst_window_pauses,
                     "run_windows_with_rs_pause": rs_paused_during, "run_windows": len(during),
                     "p99_ms_of_windows_before_the_run_with_rs_pause": before_with_pause,
                     "rss_rest_mib": rss_rest, "rss_peak_mib": rss_peak, "wall_secs": report["duration_ms"] / 1000,
                     "mean_rate": report["pacing"]["mean_rate"]}

idle_secs = None
if os.path.exists(f"{out}/idle-unpaced-ranker.json"):
    idle = json.load(open(f"{out}/idle-unpaced-ranker.json"))
    read = json.load(open(f"{out}/idle-bench-read.json"))
    idle_secs = idle["duration_ms"] / 1000
    idle_rate = idle["comments_scored"] / idle_secs
    read_rate = read["comments_scored"] / (read["duration_ms"] / 1000)
    print(f"\nidle HBase: ranker run --pace off {idle_secs:.1f} s ({idle_rate:,.0f} comments/s); "
          f"bench-read {read_rate:,.0f} comments/s")
    summary["idle"] = {"wall_secs": idle_secs, "rate": idle_rate, "bench_read_rate": read_rate}
print("targets (of the phases that ran):")
paced = summary.get("paced")
if paced:
    print(f"  paced worst p99 / rest median p99: {paced['worst_p99_ms'] / paced['rest_p99_ms']:.2f} (<= 3), "
          f"worst p99 {paced['worst_p99_ms']:.1f} ms (< 50)")
    print(f"  paced shed {paced['shed']}, 5xx {paced['errors']} (0, 0); "
          f"RSS peak vs rest {(paced['rss_peak_mib'] / paced['rss_rest_mib'] - 1) * 100:+.1f} % (within 10 %)")
if paced and idle_secs:
    print(f"  paced wall / unpaced wall on idle HBase: {paced['wall_secs'] / idle_secs:.2f} (<= 3)")
if idle_secs:
    print(f"  unpaced rate / bench-read rate: {idle_rate / read_rate:.2f} (>= 0.8)")
json.dump(summary, open(f"{out}/summary.json", "w"), indent=2)
PY

python="$(plot_python)" && "$python" - "$OUT" bench/contention-p99.png <<'PY' || echo "contention: no plot (see above)"
import json, os, sys
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
out, png = sys.argv[1], sys.argv[2]
fig, ax = plt.subplots(figsize=(10, 5))
for name, colour in (("paced", "tab:blue"), ("unpaced", "tab:red")):
    if not os.path.exists(f"{out}/{name}-timeline.json"):
        continue
    windows = [json.loads(line) for line in open(f"{out}/{name}-windows.jsonl")]
    timeline = json.load(open(f"{out}/{name}-timeline.json"))
    ax.plot([w["end_secs"] for w in windows], [w["p99_ms"] for w in windows], marker="o", color=colour,
            label=f"p99, ranker {'default (one call in flight)' if name == 'paced' else '--pace off'}")
    ax.axvspan(timeline["start_secs"], timeline["end_secs"], color=colour, alpha=0.08)
ax.set_yscale("log")
ax.set_xlabel("seconds since the load started (shaded: the ranker runs)")
ax.set_ylabel("p99 latency per 10-s window (ms, log scale)")
ax.set_title("query-api at an open-loop 500 req/s while the ranker runs (bench_ data, 1,000,000 comments)")
ax.grid(True, which="both", alpha=0.3)
ax.legend()
fig.tight_layout()
fig.savefig(png, dpi=110)
print(f"contention: plot written to {png}")
PY
echo "contention: results in $OUT/ (summary.json, per-phase windows, ranker reports)"
