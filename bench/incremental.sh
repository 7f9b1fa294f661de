#!/usr/bin/env bash
# The incremental-run benchmark (BENCHMARKS.md, "Incremental runs"), on both
# benchmark catalogs: bench_ (bench/load.sh: 10,000 products, 1,000,000
# comments) and bench_large_ (bench/load.sh --large: 100,000 products,
# 2,000,000 comments). On each, in one run of this script:
#
# 1. a full `ranker run` as of a fixed time (recorded in the run history: the
#    watermark of step 3);
# 2. `incremental-changes change`: 100 products (seeded; 1 % of the small
#    catalog, 0.1 % of the large one) get one change each, the kinds in turn:
#    a new comment and an edit through the write path, a vote and an edit
#    written as the Java service wrote them (the comment row put directly), a
#    delete of the product's best comment;
# 3. with INCREMENTAL_BEFORE=PATH (an earlier build's `ranker`): that build's
#    and this build's `--changed-since last --dry-run`, in the order
#    before, this, this, before (both read what they would rank, neither
#    writes nor records);
# 4. `ranker run --changed-since last`, then a full run, both as of the same
#    time: their wall times, the ratio, the search's time and what it read;
#    then the rank slots of every changed product after the incremental run
#    are compared with those after the full run.
#
# Then the large catalog's incremental run over the small one's: the same 100
# changes, a catalog ten times larger.
#
# Every run is unpaced (`--pace off`), as in bench/ranker.sh. The data sets
# are changed by each round (a second round changes another 100 products:
# give it another INCREMENTAL_SEED). The watermark's skew margin is
# INCREMENTAL_SKEW_MARGIN_SECS (default 300, the ranker's): the data must be
# older than the full run's start less the margin, or it counts as changed
# (right after bench/load.sh, use a smaller margin; one machine has one
# clock). Results land in bench/out/incremental-*.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/lib.sh
cargo build --release --locked -p ranker --bin ranker -p bench --bin incremental-changes
out=bench/out
mkdir -p "$out"
as_of=1793491200000
seed=${INCREMENTAL_SEED:-13}
skew=${INCREMENTAL_SKEW_MARGIN_SECS:-300}
before=${INCREMENTAL_BEFORE:-}

# round PREFIX PRODUCTS SHARE: one round on one catalog, results in $out/incremental-PREFIX*.
round() {
  local prefix=$1 products=$2 share=$3
  local at="$out/incremental-$prefix"
  ranker() { "$BIN/ranker" run --pace off --table-prefix "$prefix" --as-of "$as_of" --json "$@"; }
  dry() {
    "$1" run --pace off --table-prefix "$prefix" --as-of "$as_of" --json --changed-since last \
      --skew-margin-secs "$skew" --dry-run >"$2" 2>"$2.err"
  }

  ranker >"$at-full-before.json" 2>"$at-full-before.err"
  "$BIN/incremental-changes" change --table-prefix "$prefix" --products "$products" --share "$share" \
    --seed "$seed" >"$at-changed.txt" 2>"$at-changed.err"
  cat "$at-changed.err"
  if [ -n "$before" ]; then
    dry "$before" "$at-dry-before-1.json"
    dry "$BIN/ranker" "$at-dry-this-1.json"
    dry "$BIN/ranker" "$at-dry-this-2.json"
    dry "$before" "$at-dry-before-2.json"
  fi
  ranker --changed-since last --skew-margin-secs "$skew" >"$at-run.json" 2>"$at-run.err"
  "$BIN/incremental-changes" slots --table-prefix "$prefix" <"$at-changed.txt" >"$at-slots-incremental.jsonl"
  ranker >"$at-full-after.json" 2>"$at-full-after.err"
  "$BIN/incremental-changes" slots --table-prefix "$prefix" <"$at-changed.txt" >"$at-slots-full.jsonl"
}

round bench_ 10000 0.01
round bench_large_ 100000 0.001

python3 - "$out" "$before" <<'PY'
import json, sys
out, before = sys.argv[1], sys.argv[2]
failed = False
incremental_s = {}
for prefix, label in [("bench_", "10,000 products"), ("bench_large_", "100,000 products")]:
    at = f"{out}/incremental-{prefix}"
    run = json.load(open(f"{at}-run.json"))
    full = json.load(open(f"{at}-full-after.json"))
    changes = run["changes"]
    search, total = changes["detection_ms"] / 1000, run["duration_ms"] / 1000
    incremental_s[prefix] = total
    print(f"{label}:")
    print(f"  full run: {full['duration_ms'] / 1000:.1f} s, {full['products_ranked']} products, "
          f"{full['comments_scored']} comments")
    print(f"  incremental run: {total:.2f} s, {run['products_ranked']} products, {run['comments_scored']} comments; "
          f"ratio {run['duration_ms'] / full['duration_ms']:.3f}")
    print(f"  finding what changed: {search:.2f} s ({100 * search / total:.0f} % of the run), ranking: "
          f"{total - search:.2f} s; read {changes['comment_rows_written']} comment rows and "
          f"{changes['index_rows_written']} index rows written since, {changes['slots_checked']} slots checked "
          f"({changes['slots_dangling']} dangling); products: {changes['products_written']} written, "
          f"{changes['products_refreshed']} refreshed, {changes['products_to_rank']} ranked")
    if before:
        def seconds(name):
            return json.load(open(f"{at}-dry-{name}.json"))["duration_ms"] / 1000
        def search_s(name):
            return json.load(open(f"{at}-dry-{name}.json"))["changes"]["detection_ms"] / 1000
        b = (seconds("before-1") + seconds("before-2")) / 2
        t = (seconds("this-1") + seconds("this-2")) / 2
        bs = (search_s("before-1") + search_s("before-2")) / 2
        ts = (search_s("this-1") + search_s("this-2")) / 2
        print(f"  dry runs, mean of two each: before {b:.2f} s (search {bs:.2f} s), this build {t:.2f} s "
              f"(search {ts:.2f} s); this / before {t / b:.3f}")
    after_incremental = open(f"{at}-slots-incremental.jsonl").read().splitlines()
    after_full = open(f"{at}-slots-full.jsonl").read().splitlines()
    same = sum(a == b for a, b in zip(after_incremental, after_full))
    print(f"  changed products whose rank slots equal the full run's: {same} of {len(after_full)}")
    failed |= same != len(after_full) or len(after_incremental) != len(after_full)
print(f"the same 100 changes, a catalog ten times larger: incremental run "
      f"{incremental_s['bench_large_'] / incremental_s['bench_']:.2f}x")
if failed:
    sys.exit("an incremental run's slots differ from the full run's")
PY
