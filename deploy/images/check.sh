#!/usr/bin/env bash
# Builds the three images (deploy/images/build.sh) and runs each from its
# archive (deploy/images/run.sh: read-only root filesystem, user 10001, the
# entrypoint as PID 1) against a live HBase, under a table prefix of its own:
#
#   reviews-admin   creates the tables and loads a small demo catalogue;
#   ranker          ranks one product (`ranker run --product`), and
#                   ranker-cron answers --version beside it;
#   query-api       answers /readyz and that product's ranked page, runs as
#                   uid 10001 with a read-only root, and on SIGTERM drains and
#                   exits 0 (the documented status).
#
# Fails, saying which step, when any of it does not hold. scripts/test.sh
# builds the images before its HBase starts and runs this while it is up
# (IMAGES_BUILT=1: the archives in target/images are used as they are);
# alone it builds them first, and needs an HBase at REVIEWS_THRIFT_ADDR /
# REVIEWS_THRIFT2_ADDR (default: the local one, hbase/hbasectl start) and
# root.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

# Nothing here runs podman: the images are not loaded into it.
[[ "${IMAGES_BUILT:-0}" == 1 ]] || IMAGE_LOAD=0 deploy/images/build.sh
run=deploy/images/run.sh
hbase_env=(
  -e "REVIEWS_THRIFT_ADDR=${REVIEWS_THRIFT_ADDR:-127.0.0.1:9090}"
  -e "REVIEWS_THRIFT2_ADDR=${REVIEWS_THRIFT2_ADDR:-127.0.0.1:9091}"
  -e RUST_LOG=warn
)
prefix="image_$$_"
product=P000000001
log="$(mktemp)"
api_pid=
cleanup() {
  # run.sh passes the TERM on to the service.
  if [[ -n "$api_pid" ]] && kill -TERM "$api_pid" 2>/dev/null; then
    wait "$api_pid" || true
  fi
  "$run" "${hbase_env[@]}" reviews-admin schema drop --table-prefix "$prefix" >/dev/null 2>&1 || true
  rm -f "$log"
}
trap cleanup EXIT
fail() {
  echo "images: $*" >&2
  exit 1
}

"$run" "${hbase_env[@]}" reviews-admin schema create --table-prefix "$prefix" >/dev/null ||
  fail "reviews-admin could not create the tables"
"$run" "${hbase_env[@]}" reviews-admin demo load --table-prefix "$prefix" --users 20 --products 3 --comments 60 >/dev/null ||
  fail "reviews-admin could not load the demo data"
"$run" "${hbase_env[@]}" ranker run --table-prefix "$prefix" --product "$product" >/dev/null ||
  fail "ranker could not rank $product"
cron_version="$("$run" --entrypoint /usr/local/bin/ranker-cron ranker --version)" ||
  fail "ranker-cron does not run in the ranker image"
[[ "$cron_version" == "ranker-cron "* ]] || fail "ranker-cron --version printed: $cron_version"
echo "images: reviews-admin created and loaded the tables, ranker ranked $product" >&2

port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
"$run" "${hbase_env[@]}" -e "REVIEWS_API_LISTEN=127.0.0.1:$port" query-api --table-prefix "$prefix" >"$log" 2>&1 &
api_pid=$!
ready=""
for _ in $(seq 1 60); do
  if curl -fsS "http://127.0.0.1:$port/readyz" >/dev/null 2>&1; then
    ready=1
    break
  fi
  kill -0 "$api_pid" 2>/dev/null || { cat "$log" >&2; fail "query-api exited before it was ready"; }
  sleep 0.5
done
[[ -n "$ready" ]] || { cat "$log" >&2; fail "query-api is not ready after 30 s"; }
ranked="$(curl -fsS "http://127.0.0.1:$port/v1/products/$product/comments/ranked")" ||
  fail "query-api did not answer the ranked page"
python3 - "$ranked" "$product" <<'EOF' || fail "the ranked page is not the product's ranked reviews: $ranked"
import json, sys
answer = json.loads(sys.argv[1])
ranks = [comment["rank"] for comment in answer["comments"]]
assert ranks and ranks == list(range(1, len(ranks) + 1)), ranks
assert all(comment["productId"] == sys.argv[2] for comment in answer["comments"])
EOF
# run.sh starts unshare, whose only child is the service, PID 1 in its namespace.
service="$(pgrep -P "$(pgrep -P "$api_pid" | head -n 1)" | head -n 1)"
[[ "$(awk '/^Uid:/ { print $2 }' "/proc/$service/status")" == 10001 ]] || fail "query-api does not run as uid 10001"
grep -q "^NSpid:.*[[:space:]]1$" "/proc/$service/status" || fail "query-api is not PID 1 in its namespace"
# Seen from the service, its root is the image's root filesystem.
mount_options="$(awk '$5 == "/" { print $6 }' "/proc/$service/mountinfo")"
[[ "$mount_options" == ro,* || "$mount_options" == ro ]] || fail "query-api's root filesystem is not read-only ($mount_options)"
echo "images: query-api answered /readyz and the ranked page as uid 10001, PID 1, on a read-only root" >&2

kill -TERM "$api_pid"
status=0
wait "$api_pid" || status=$?
api_pid=
[[ "$status" == 0 ]] || { cat "$log" >&2; fail "query-api exited $status on SIGTERM, not 0"; }
echo "images: query-api drained and exited 0 on SIGTERM" >&2
