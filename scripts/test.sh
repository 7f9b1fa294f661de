#!/usr/bin/env bash
# Runs every check and every test, the way CI does, on a fresh machine:
# formatting, lints, unit tests, the monitoring rules' own tests (promtool,
# installing Debian's prometheus packages on first use), the deployment
# files (Kubernetes' schemas and checkov, from PyPI on first use, and
# systemd-analyze), the integration tests
# against a real HBase that this script starts (resolving it from Maven
# Central on first use), the OpenAPI fuzzer against the live service on
# that HBase, the review widgets' tests in headless Chromium (installing
# Debian's chromium package and the pinned npm packages on first use), and
# the container images run against it (umoci from Debian's packages); the
# traces test builds Jaeger with Go first.
#
# The tests get an HBase of their own, fresh on every run (run dir
# hbase/run-test, Thrift1 port 9190, Thrift2 port 9191, ZooKeeper port 21910;
# TEST_THRIFT_PORT, TEST_THRIFT2_PORT and TEST_ZK_PORT move them), so they never touch
# the data of the HBase that scripts/demo.sh runs, and tables left by earlier
# runs cannot pile up. It is killed and its data deleted when the script ends.
# One test (replicas) starts a small cluster of its own beside it (two region
# servers, free ports, tests/src/cluster.rs) and discards it when it ends.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

export HBASE_RUN_DIR="$PWD/hbase/run-test"
export HBASE_THRIFT_PORT="${TEST_THRIFT_PORT:-9190}"
export HBASE_ZK_PORT="${TEST_ZK_PORT:-21910}"
export HBASE_THRIFT2_PORT="${TEST_THRIFT2_PORT:-$((HBASE_THRIFT_PORT + 1))}"
export REVIEWS_THRIFT_ADDR="127.0.0.1:$HBASE_THRIFT_PORT"
export REVIEWS_THRIFT2_ADDR="127.0.0.1:$HBASE_THRIFT2_PORT"
# The Thrift2 gateways the suite tests (HBase's own when set to blocking),
# whatever a developer's last start in this run dir chose (hbasectl keeps it).
export HBASE_THRIFT2_READS="${HBASE_THRIFT2_READS:-async}"
# The suite creates and drops about a thousand tables in one HBase JVM; with
# the default 3 GiB its master ran into full collections of one to three
# seconds after a couple of runs, long enough to time a request out.
export HBASE_MASTER_HEAP="${HBASE_MASTER_HEAP:-4g}"
# Without incremental compilation's caches: a run builds once, and the
# caches only add to a clean run's Cargo output (4.7 GiB without them,
# debug and release), on a disk a CI machine may share. The
# cost: switching between this and a plain `cargo` command rebuilds the
# workspace's own crates. Set CARGO_INCREMENTAL=1 to keep the caches.
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"
# Said first, so a run that dies of a full disk says how full it began.
free_space="$(df -h --output=avail "${CARGO_TARGET_DIR:-.}" 2>/dev/null | tail -n 1 | tr -d ' ' || true)"
echo "test.sh: ${free_space:-?} free where Cargo builds" >&2

# Each phase's wall time is printed as it ends and again all together at the
# end, so a slow run says where its time went.
phase_name=""
phase_started=$SECONDS
phase_times=""
phase() {
    if [[ -n "$phase_name" ]]; then
        phase_times+="$(printf '  %-34s %4d s' "$phase_name" $((SECONDS - phase_started)))"$'\n'
        echo "test.sh: $phase_name took $((SECONDS - phase_started)) s" >&2
    fi
    phase_name="${1:-}"
    phase_started=$SECONDS
}

# HBase's jars resolve from Maven Central while the workspace compiles (on a
# fresh machine that download is most of HBase's start); it needs little CPU.
classpath_log="$(mktemp)"
hbase/hbasectl classpath >"$classpath_log" 2>&1 &
classpath_pid=$!
# A check that fails before HBase starts stops the download and its log too.
trap 'kill "$classpath_pid" 2>/dev/null || true; rm -f "$classpath_log"' EXIT

phase "format"
cargo fmt --all --check
phase "clippy"
cargo clippy --workspace --all-targets --locked -- -D warnings
phase "feature and layer checks"
# The services build without common's `test-support` feature (raw HBase access
# for the integration tests), dev-dependencies included: query-api never writes.
for service in query-api ranker cron; do
    if cargo tree -p "$service" -e features --locked | grep -q test-support; then
        echo "$service must not depend on common's test-support feature" >&2
        exit 1
    fi
done
# Each crate's modules form layers (ARCHITECTURE.md): none imports another
# that imports it back, which rustc would accept.
scripts/check-module-cycles.py common/src ranker/src cron/src query-api/src admin/src
# The check itself finds circles planted in scratch copies of the crates.
python3 scripts/test_check_module_cycles.py
phase "monitoring rules"
# The alerting and recording rules parse and every alert fires when it should
# and only then; this also installs what the live monitoring test runs.
deploy/monitoring/check.sh
# Build everything before HBase starts, so the two do not compete for the CPU.
# The tests that spawn a binary have Cargo build it (`integration_tests::cargo_binary`
# runs `cargo build --workspace --bin <name>`), which finds it up to date after this.
phase "build binaries"
cargo build --workspace --bins --locked
phase "deployment files"
# The Kubernetes manifests against Kubernetes' schemas and checkov, the
# systemd units with systemd-analyze (against the binaries just built).
scripts/check-manifests.sh
phase "build tests"
cargo test --workspace --locked --no-run
# The trace store the traces test sends spans to, built from its Go module
# on first use (scripts/jaeger.sh; about four minutes on two cores).
phase "trace store"
scripts/jaeger.sh build >/dev/null
# The container images (release binaries, Debian's base packages), run
# against the tests' HBase in the "images" phase below.
phase "build images"
IMAGE_LOAD=0 deploy/images/build.sh

phase "start HBase"
if ! wait "$classpath_pid"; then
    cat "$classpath_log" >&2
    exit 1
fi
rm -f "$classpath_log"
# The tests' HBase is thrown away after each run: killed, not shut down cleanly.
hbase/hbasectl discard
trap 'hbase/hbasectl discard || true' EXIT
hbase/hbasectl start

# The integration tests mostly wait on HBase, so more threads than cores
# shortens the run; each test owns its tables, so they do not interfere.
results="$(mktemp)"
alone="reliability::gateway_failover::"
trap 'rm -f "$results"; hbase/hbasectl discard || true' EXIT
status=0
phase "tests"
# --no-fail-fast: a failing test binary does not keep the others from running.
# The gateway failover tests run on their own afterwards (below).
cargo test --workspace --locked --no-fail-fast -- --test-threads "${TEST_THREADS:-8}" \
    --skip "$alone" 2>&1 | tee "$results" || status=$?
# The tests that kill gateways under load and allow no failed read within
# a deadline, alone: beside seven other tests on two cores, a gateway took
# over 90 s to restart and reads waited seconds for the CPU, not for the
# deaths the tests are about. They run after the others, one at a time.
phase "failover tests"
cargo test --locked -p integration-tests --test it -- --test-threads 1 "$alone" 2>&1 | tee -a "$results" || status=$?
# The OpenAPI document against the live service, on the same HBase: a
# schema-driven fuzzer with every check on (scripts/fuzz-api.sh).
phase "API fuzzer"
scripts/fuzz-api.sh || status=1
# The review widgets in headless Chromium against the live service, on the
# same HBase (scripts/browser-tests.sh; node's test runner).
phase "browser tests"
scripts/browser-tests.sh 2>&1 | tee -a "$results" || status=1
# The container images, built from Debian's packages and the release
# binaries, each run from its archive against the same HBase
# (deploy/images/check.sh).
phase "images"
IMAGES_BUILT=1 deploy/images/check.sh 2>&1 | tee -a "$results" || status=1
phase "stop HBase"
trap 'rm -f "$results"' EXIT
hbase/hbasectl discard || true
phase
printf 'test.sh: time by phase\n%s  %-34s %4d s\n' "$phase_times" "total" "$SECONDS" >&2

# cargo prints one "test result" line per test binary, the last of which is
# often a doc-test binary with nothing in it, and node's runner its own
# "ℹ pass N" and "ℹ fail N"; this closing line adds them all up, so the run
# ends by saying what it really ran.
awk '/^test result:/ { passed += $4; failed += $6 }
     /^ℹ pass / { passed += $3 } /^ℹ fail / { failed += $3 }
     END { printf "all tests: %d passed, %d failed\n", passed, failed }' "$results"
exit "$status"
