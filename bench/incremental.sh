#!/usr/bin/env bash
# The incremental-run benchmark (BENCHMARKS.md, "Incremental runs"), on the
# bench_ data set (bench/load.sh: 1,000,000 comments over 10,000 products):
#
# 1. a full `ranker run` as of a fixed time (recorded in the run history: the
#    watermark of step 3);
# 2. `incremental-changes change`: 1 % of the products (100, seeded) get one
#    change each, the kinds in turn: a new comment and an edit through the
#    write path, a vote and an edit written as the Java service wrote them (the
#    comment row put directly), a delete of the product's best comment;
# 3. `ranker run --changed-since last`, then a full run, both as of the same
#    time: their wall times, the ratio, and the incremental run's time to find
#    what changed; then the rank slots of every changed product after the
#    incremental run are compared with those after the full run.
#
# Every run is unpaced (`--pace off`), as in bench/ranker.sh. The data set is
# changed by each round (a second run changes another 1 %). The watermark's
# skew margin is INCREMENTAL_SKEW_MARGIN_SECS (default 300, the ranker's): the
# data must be older than the full run's start less the margin, or it counts
# as changed (right after bench/load.sh, use a smaller margin; one machine
# has one clock). Results land in bench/out/incremental-*.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/lib.sh
cargo build --release --locked -p ranker --bin ranker -p bench --bin incremental-changes
out=bench/out
mkdir -p "$out"
as_of=1793491200000
seed=${INCREMENTAL_SEED:-13}
skew=${INCREMENTAL_SKEW_MARGIN_SECS:-300}
ranker() { "$BIN/ranker" run --pace off --table-prefix bench_ --as-of "$as_of" --json "$@"; }

ranker >"$out/incremental-full-before.json" 2>"$out/incremental-full-before.err"
"$BIN/incremental-changes" change --table-prefix bench_ --seed "$seed" \
  >"$out/incremental-changed.txt" 2>"$out/incremental-changed.err"
cat "$out/incremental-changed.err"
ranker --changed-since last --skew-margin-secs "$skew" >"$out/incremental-run.json" 2>"$out/incremental-run.err"
"$BIN/incremental-changes" slots --table-prefix bench_ <"$out/incremental-changed.txt" >"$out/incremental-slots-incremental.jsonl"
ranker >"$out/incremental-full-after.json" 2>"$out/incremental-full-after.err"
"$BIN/incremental-changes" slots --table-prefix bench_ <"$out/incremental-changed.txt" >"$out/incremental-slots-full.jsonl"

python3 - "$out" <<'PY'
import json, sys
out = sys.argv[1]
incremental = json.load(open(f"{out}/incremental-run.json"))
full = json.load(open(f"{out}/incremental-full-after.json"))
changes = incremental["changes"]
ratio = incremental["duration_ms"] / full["duration_ms"]
print(f"full run: {full['duration_ms'] / 1000:.1f} s, {full['products_ranked']} products, {full['comments_scored']} comments")
print(f"incremental run: {incremental['duration_ms'] / 1000:.1f} s, {incremental['products_ranked']} products, "
      f"{incremental['comments_scored']} comments; ratio {ratio:.3f}")
print(f"finding what changed: {changes['detection_ms'] / 1000:.1f} s "
      f"({changes['comment_rows_written']} comment rows and {changes['index_rows_written']} index rows written since; "
      f"{changes['slots_read']} slots, "
      f"{changes['slots_dangling']} dangling); products: {changes['products_written']} written, "
      f"{changes['products_with_deleted_comments']} with a deleted comment, {changes['products_refreshed']} refreshed, "
      f"{changes['products_to_rank']} to rank")
after_incremental = open(f"{out}/incremental-slots-incremental.jsonl").read().splitlines()
after_full = open(f"{out}/incremental-slots-full.jsonl").read().splitlines()
same = sum(a == b for a, b in zip(after_incremental, after_full))
print(f"changed products whose rank slots equal the full run's: {same} of {len(after_full)}")
if same != len(after_full) or len(after_incremental) != len(after_full):
    sys.exit("the incremental run's slots differ from the full run's")
PY
