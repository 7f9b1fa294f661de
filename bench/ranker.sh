#!/usr/bin/env bash
# The ranker benchmark (BENCHMARKS.md): on the bench_ data set, alternates the
# raw read pass (same index rows and comments, same gateway, same concurrency,
# no scoring, no writes) with a full `ranker run`, twice, under /usr/bin/time
# for peak RSS. The run is unpaced (`--pace off`): this measures what ranking
# costs on top of reading, not how politely it shares HBase (that is
# bench/contention.sh). Results land in bench/out/ranker-{read,run}-{1,2}.{json,err}.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/lib.sh
build_release_binaries
out=bench/out
mkdir -p "$out"
for round in 1 2; do
  /usr/bin/time -v target/release/ranker bench-read --table-prefix bench_ --json \
    >"$out/ranker-read-$round.json" 2>"$out/ranker-read-$round.err"
  /usr/bin/time -v target/release/ranker run --pace off --table-prefix bench_ --as-of 1793491200000 --json \
    >"$out/ranker-run-$round.json" 2>"$out/ranker-run-$round.err"
done
python3 - "$out" <<'PY'
import json, re, sys
out = sys.argv[1]
for round in (1, 2):
    rates, rss = {}, {}
    for kind in ("read", "run"):
        report = json.load(open(f"{out}/ranker-{kind}-{round}.json"))
        rates[kind] = report["comments_scored"] / (report["duration_ms"] / 1000)
        rss[kind] = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", open(f"{out}/ranker-{kind}-{round}.err").read()).group(1))
    print(f"round {round}: read {rates['read']:,.0f} comments/s, run {rates['run']:,.0f} comments/s, "
          f"ratio {rates['run'] / rates['read']:.3f}, peak RSS read {rss['read'] / 1024:.1f} MiB, run {rss['run'] / 1024:.1f} MiB")
PY
