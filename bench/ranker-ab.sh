#!/usr/bin/env bash
# Paired rounds of a full unpaced `ranker run` on the bench_ data set (load it
# first: bench/load.sh): another build of the ranker (A, say the commit before
# a change) against this checkout's release build (B), in turns A B B A for
# each pair of rounds, each under /usr/bin/time for peak RSS. The machine is
# noisy, so what counts is each pair's ratio of wall times, B over A. An
# unmeasured run of B warms the caches first.
#
#   bench/ranker-ab.sh PATH/TO/RANKER_A [PAIRS]        # PAIRS: 2 by default
#
# Build A from another commit in a worktree of its own, for example:
#   git worktree add ../base COMMIT && (cd ../base && cargo build --release -p ranker)
#   bench/ranker-ab.sh ../base/target/release/ranker
#
# Reports land in bench/out/ranker-ab/{a,b}-N.{json,err}.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/lib.sh
ranker_a=${1:?usage: bench/ranker-ab.sh PATH/TO/RANKER_A [PAIRS]}
pairs=${2:-2}
[[ -x "$ranker_a" ]] || { echo "$ranker_a is not an executable" >&2; exit 2; }
cargo build --release --locked -p ranker --bin ranker
out=bench/out/ranker-ab
mkdir -p "$out"
rm -f "$out"/*.json "$out"/*.err

run_one() { # run_one LABEL BINARY ROUND
  /usr/bin/time -v "$2" run --pace off --table-prefix bench_ --as-of 1793491200000 --json \
    >"$out/$1-$3.json" 2>"$out/$1-$3.err"
}

# One unmeasured run first: the first run after a load or a restart reads
# cold caches (it took 45 s against 26 s for the same build right after).
run_one warmup "$BIN/ranker" 0
for pair in $(seq 1 "$pairs"); do
  if (( pair % 2 == 1 )); then
    run_one a "$ranker_a" "$pair"
    run_one b "$BIN/ranker" "$pair"
  else
    run_one b "$BIN/ranker" "$pair"
    run_one a "$ranker_a" "$pair"
  fi
done

python3 - "$out" "$pairs" <<'PY'
import json, re, sys
out, pairs = sys.argv[1], int(sys.argv[2])
def measure(label, pair):
    report = json.load(open(f"{out}/{label}-{pair}.json"))
    rss = re.search(r"Maximum resident set size \(kbytes\): (\d+)", open(f"{out}/{label}-{pair}.err").read())
    return report["duration_ms"] / 1000, int(rss.group(1)) / 1024, report
for pair in range(1, pairs + 1):
    (wall_a, rss_a, report_a), (wall_b, rss_b, report_b) = measure("a", pair), measure("b", pair)
    print(f"pair {pair}: A {wall_a:.1f} s, {rss_a:.0f} MiB; B {wall_b:.1f} s, {rss_b:.0f} MiB; "
          f"wall B/A {wall_b / wall_a:.3f}; products A {report_a['products_ranked']}, B {report_b['products_ranked']}; "
          f"failures A {len(report_a['failures'])}, B {len(report_b['failures'])}")
PY
