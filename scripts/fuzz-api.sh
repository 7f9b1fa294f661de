#!/usr/bin/env bash
# The OpenAPI document as the contract, checked against the live service:
# schemathesis (pinned below, installed from PyPI into a virtualenv under
# target/ on first use) generates requests from query-api's own /openapi.json
# and runs every check on the answers (status codes, headers, bodies against
# their schemas, schema-valid requests accepted, invalid ones refused with
# 4xx, no 5xx), against a real HBase holding ranked demo data under a table
# prefix of its own. Any finding fails the script. query-api/schemathesis.toml
# says what the fuzzer cannot know (cursors are handed out by the service).
#
# scripts/test.sh runs it while its HBase is up. Alone, it needs an HBase at
# REVIEWS_THRIFT_ADDR / REVIEWS_THRIFT2_ADDR (default the local one,
# hbase/hbasectl start) and the debug binaries (cargo build --workspace --bins).
# FUZZ_MAX_EXAMPLES (50) bounds the cases per operation.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

SCHEMATHESIS_VERSION=4.32.5
venv="$PWD/target/schemathesis"
if [[ "$("$venv/bin/schemathesis" --version 2>/dev/null)" != *" $SCHEMATHESIS_VERSION" ]]; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check "schemathesis==$SCHEMATHESIS_VERSION"
fi

bin="$PWD/target/debug"
prefix="fuzz_$$_"
log=$(mktemp)
api_pid=
cleanup() {
  [[ -n "$api_pid" ]] && kill -TERM "$api_pid" 2>/dev/null && wait "$api_pid" 2>/dev/null
  "$bin/reviews-admin" schema drop --table-prefix "$prefix" >/dev/null 2>&1 || true
  rm -f "$log"
}
trap cleanup EXIT

"$bin/reviews-admin" schema create --table-prefix "$prefix" --regions 2 >/dev/null
"$bin/reviews-admin" demo load --table-prefix "$prefix" --users 200 --products 20 --comments 2000 >/dev/null
RUST_LOG=warn "$bin/ranker" run --table-prefix "$prefix" >/dev/null

# A port below the kernel's ephemeral range, where no outgoing connection
# (HBase opens many) can take it between this check and query-api binding it.
port=$(python3 - <<'PY'
import os, socket
try:
    start = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
except (OSError, ValueError):
    start = 32768
start = start if start > 30000 else 32768
span = 8000
for step in range(span):
    port = start - span + (os.getpid() + step) % span
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            continue
    print(port)
    break
else:
    raise SystemExit(f"no free loopback port below {start}")
PY
)
RUST_LOG=warn "$bin/query-api" --listen "127.0.0.1:$port" --table-prefix "$prefix" >"$log" 2>&1 &
api_pid=$!
for _ in $(seq 1 60); do
  curl -fsS "http://127.0.0.1:$port/readyz" >/dev/null 2>&1 && break
  kill -0 "$api_pid" 2>/dev/null || { echo "query-api exited:" >&2; cat "$log" >&2; exit 1; }
  sleep 0.5
done

# Run from a directory under target/: schemathesis and hypothesis keep their
# caches in the working directory, which must not be the repository.
config="$PWD/query-api/schemathesis.toml"
mkdir -p target/fuzz-api
cd target/fuzz-api
"$venv/bin/schemathesis" --config-file "$config" --no-color run \
  "http://127.0.0.1:$port/openapi.json" --checks all --max-examples "${FUZZ_MAX_EXAMPLES:-50}" --seed 1
