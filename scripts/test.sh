#!/usr/bin/env bash
# Runs every check and every test, the way CI does, on a fresh machine:
# starts the local HBase (resolving it from Maven Central on first use), then
# formatting, lints, unit tests and the integration tests against that HBase.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# Stop HBase at the end only if this script started it, so a developer's
# running HBase is left as it was.
if ! hbase/hbasectl status >/dev/null 2>&1; then
  trap 'hbase/hbasectl stop || true' EXIT
fi
hbase/hbasectl start

cargo fmt --all --check
cargo clippy --workspace --all-targets --locked -- -D warnings
# `cargo test` builds a package's binaries only for packages that have
# integration tests of their own; the reliability tests run the real `ranker`
# binary (to kill it with SIGKILL), so build every binary first.
cargo build --workspace --bins --locked
# The integration tests mostly wait on HBase, so more threads than cores
# shortens the run; each test owns its tables, so they do not interfere.
cargo test --workspace --locked -- --test-threads "${TEST_THREADS:-8}"
