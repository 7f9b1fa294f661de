#!/usr/bin/env bash
# Paired rounds of api-bench against two or more builds of query-api, on the
# bench_ data set (load and rank it first: bench/load.sh, then bench/ranker.sh
# or a full `ranker run`). This checkout's release api-bench is the load
# generator of every round; only the query-api it starts (--api-bin) changes.
# The builds take turns A B B A for each pair of rounds (three builds:
# A B C C B A), the next pair in the reverse order (B A A B), so drift on a
# noisy machine falls on every build alike. What counts is each build's ratio
# to the first build in the same round: req/s and p99 of each scenario, as
# the mean of the rounds' ratios.
#
#   bench/api-ab.sh [OPTIONS] [LABEL=]QUERY_API [LABEL=]QUERY_API...
#
#   --scenarios LIST   api-bench scenarios, comma-separated
#                      [ranked-uncached,summary-uncached,http,hot-latest,hot-rarest,hot-rating-asc,summaries-48]
#   --duration SECS    measured seconds per scenario                 [30]
#   --warmup SECS      unmeasured warm-up seconds per scenario       [5]
#   --pairs N          pairs of rounds (each build runs 2N times)    [1]
#
# The first build is the baseline. A label is the LABEL= part, else the
# binary's file name without a leading "query-api-" (labels must differ).
# Build the other binaries in worktrees of their own, for example:
#   git worktree add /tmp/ab/src-COMMIT COMMIT
#   (cd /tmp/ab/src-COMMIT && CARGO_TARGET_DIR=/tmp/ab/target-COMMIT \
#      cargo build --release --locked -p query-api --bin query-api)
#   cp /tmp/ab/target-COMMIT/release/query-api /tmp/ab/query-api-COMMIT
#   bench/api-ab.sh /tmp/ab/query-api-COMMIT target/release/query-api
#
# Every round runs the same api-bench flags: --table-prefix bench_
# --pool-size 32 --connections 32 (plus the options above). A round is
# bounded: api-bench bounds its request loops, and a round still running
# (scenarios x (warm-up + duration)) + 180 s after it began is stopped
# (timeout signals api-bench's process group, its services included) and
# the script fails. Each round's output lands in
# bench/out/api-ab/LABEL-ROUND/ (summary.csv, latency.csv, the services'
# logs, api-bench's stdout as bench.log); the table is printed and written to
# bench/out/api-ab/table.txt, every round's figures to
# bench/out/api-ab/rounds.csv. A run replaces bench/out/api-ab.
set -euo pipefail

usage() { # usage [STATUS]: the usage lines of the header, on stderr
  sed -n '/^#   bench\/api-ab.sh \[OPTIONS\]/,/^#   --pairs/s/^# \{0,1\}//p' "${BASH_SOURCE[0]}" >&2
  exit "${1:-2}"
}

scenarios=ranked-uncached,summary-uncached,http,hot-latest,hot-rarest,hot-rating-asc,summaries-48
duration=30
warmup=5
pairs=1
labels=()
binaries=()
while (($#)); do
  case $1 in
    --scenarios) scenarios=${2:?--scenarios needs a list}; shift 2 ;;
    --duration) duration=${2:?--duration needs seconds}; shift 2 ;;
    --warmup) warmup=${2:?--warmup needs seconds}; shift 2 ;;
    --pairs) pairs=${2:?--pairs needs a number}; shift 2 ;;
    -h | --help) usage 0 ;;
    -*) echo "unknown option $1" >&2; usage ;;
    *)
      if [[ $1 == *=* ]]; then
        label=${1%%=*} path=${1#*=}
      else
        path=$1 label=$(basename "$1")
        [[ $label == query-api-?* ]] && label=${label#query-api-}
      fi
      [[ -f "$path" && -x "$path" ]] || { echo "$path is not an executable" >&2; exit 2; }
      [[ $label =~ ^[A-Za-z0-9._-]+$ ]] || { echo "label '$label' (of $path): use letters, digits, . _ -" >&2; exit 2; }
      for seen in "${labels[@]}"; do
        [[ $seen != "$label" ]] || { echo "two builds are labelled $label: give LABEL=PATH" >&2; exit 2; }
      done
      labels+=("$label")
      # Absolute, since the script runs from the repository root.
      binaries+=("$(realpath "$path")")
      shift
      ;;
  esac
done
((${#binaries[@]} >= 2)) || { echo "give two or more query-api binaries" >&2; usage; }
for number in "$duration" "$warmup" "$pairs"; do
  [[ $number =~ ^[0-9]+$ ]] || { echo "not a whole number: $number" >&2; exit 2; }
done
((duration > 0 && pairs > 0)) || { echo "--duration and --pairs must be positive" >&2; exit 2; }
[[ $scenarios =~ ^[a-z0-9-]+(,[a-z0-9-]+)*$ ]] || { echo "--scenarios: a comma-separated list" >&2; exit 2; }

cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/lib.sh
cargo build --release --locked -p bench --bin api-bench -p query-api --bin query-api
out=bench/out/api-ab
rm -rf "$out"
mkdir -p "$out"

# The order of the rounds: forward then backward per pair, the next pair
# backward then forward.
builds=${#binaries[@]}
order=()
for pair in $(seq 1 "$pairs"); do
  forward=() backward=()
  for ((i = 0; i < builds; i++)); do
    forward+=("$i")
    backward+=("$((builds - 1 - i))")
  done
  if ((pair % 2 == 1)); then
    order+=("${forward[@]}" "${backward[@]}")
  else
    order+=("${backward[@]}" "${forward[@]}")
  fi
done

scenario_count=$(tr ',' '\n' <<<"$scenarios" | wc -l)
per_round=$((scenario_count * (warmup + duration)))
limit=$((per_round + 180))
echo "api-ab: ${#order[@]} rounds of ${per_round} s measured and warm-up each (at most ${limit} s each);" \
  "order $(for i in "${order[@]}"; do printf '%s ' "${labels[$i]}"; done)"

declare -A rounds_done=()
for i in "${order[@]}"; do
  label=${labels[$i]}
  round=$((${rounds_done[$label]:-0} + 1))
  rounds_done[$label]=$round
  dir="$out/$label-$round"
  mkdir -p "$dir"
  printf 'api-ab: %s round %s (%(%H:%M:%S)T) -> %s\n' "$label" "$round" -1 "$dir"
  if ! timeout --kill-after=30 "$limit" "$BIN/api-bench" --api-bin "${binaries[$i]}" --table-prefix bench_ \
    --pool-size 32 --connections 32 --scenarios "$scenarios" --duration-secs "$duration" \
    --warmup-secs "$warmup" --out-dir "$dir" >"$dir/bench.log" 2>&1; then
    echo "api-ab: $label round $round failed or outran ${limit} s; the end of $dir/bench.log:" >&2
    tail -n 20 "$dir/bench.log" >&2
    exit 1
  fi
  grep -E "^($(tr ',' '|' <<<"$scenarios")) +[0-9]+ ok " "$dir/bench.log" | sed 's/^/  /' || true
done

python3 - "$out" "$scenarios" "$((2 * pairs))" "${labels[@]}" <<'PY' | tee "$out/table.txt"
import csv, sys
out, scenarios, rounds, labels = sys.argv[1], sys.argv[2].split(","), int(sys.argv[3]), sys.argv[4:]

figures = {}  # (label, round, scenario) -> (req/s, p99 ms, errors)
with open(f"{out}/rounds.csv", "w", newline="") as rounds_csv:
    writer = csv.writer(rounds_csv)
    writer.writerow(["build", "round", "scenario", "throughput_rps", "p99_ms", "requests", "errors"])
    for label in labels:
        for r in range(1, rounds + 1):
            with open(f"{out}/{label}-{r}/summary.csv", newline="") as summary:
                for row in csv.DictReader(summary):
                    rps, p99, errors = float(row["throughput_rps"]), float(row["p99_ms"]), int(row["errors"])
                    figures[label, r, row["scenario"]] = (rps, p99, errors)
                    writer.writerow([label, r, row["scenario"], rps, p99, row["requests"], errors])

def mean_ratio(label, scenario, index):
    ratios = []
    for r in range(1, rounds + 1):
        base = figures[labels[0], r, scenario][index]
        ratios.append(figures[label, r, scenario][index] / base if base > 0 else float("nan"))
    return sum(ratios) / len(ratios), ratios

base = labels[0]
print(f"{rounds} rounds per build; ratios are each round's figure over {base}'s in the same round, then their mean")
label_width = max(len("build"), *map(len, labels))
header = (f"{'scenario':<17} {'build':<{label_width}}  {'req/s by round':<{9 * rounds}}  {'p99 ms by round':<{9 * rounds}}"
          f"  {'req/s ratio':>11}  {'p99 ratio':>9}  errors  (ratios by round)")
print(header)
print("-" * len(header))
for scenario in scenarios:
    for number, label in enumerate(labels):
        rows = [figures[label, r, scenario] for r in range(1, rounds + 1)]
        rps = "".join(f"{row[0]:>9,.0f}" for row in rows)
        p99 = "".join(f"{row[1]:>9.2f}" for row in rows)
        errors = sum(row[2] for row in rows)
        if number == 0:
            ratio, detail = f"{'1':>11}  {'1':>9}", ""
        else:
            rps_mean, rps_each = mean_ratio(label, scenario, 0)
            p99_mean, p99_each = mean_ratio(label, scenario, 1)
            ratio = f"{rps_mean:>11.3f}  {p99_mean:>9.3f}"
            detail = ("  (req/s " + ", ".join(f"{x:.3f}" for x in rps_each)
                      + "; p99 " + ", ".join(f"{x:.3f}" for x in p99_each) + ")")
        name = scenario if number == 0 else ""
        print(f"{name:<17} {label:<{label_width}}  {rps:<{9 * rounds}}  {p99:<{9 * rounds}}  {ratio}  {errors:>6}{detail}")
if any(errors for (_, _, errors) in figures.values()):
    print("note: req/s counts successes only; a build with errors in a scenario did not do the same work")
PY
echo "api-ab: rounds in $out/LABEL-ROUND, figures in $out/rounds.csv, this table in $out/table.txt"
