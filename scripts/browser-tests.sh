#!/usr/bin/env bash
# The review widgets in a real browser: headless Chromium (Debian's
# `chromium` package, installed on first use) driven by puppeteer-core
# (pinned in widget/test/package-lock.json, installed under
# target/widget-test on first use; it downloads no browser), against
# query-api on a real HBase holding ranked demo data under a table prefix of
# its own. The tests (widget/test/*.test.mjs, node's test runner) start the
# services they need themselves: query-api with its demo pages, a shop's page
# on another origin, and a query-api whose HBase connection they can cut.
#
# scripts/test.sh runs it while its HBase is up. Alone, it needs an HBase at
# REVIEWS_THRIFT_ADDR / REVIEWS_THRIFT2_ADDR (default the local one,
# hbase/hbasectl start) and the debug binaries (cargo build --workspace --bins).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

if [ -z "${WIDGET_TEST_CHROMIUM:-}" ] && ! command -v chromium >/dev/null; then
    echo "installing Debian's chromium package" >&2
    as_root=()
    [ "$(id -u)" -eq 0 ] || as_root=(sudo)
    "${as_root[@]}" apt-get update -qq
    # fonts-noto-cjk: the widgets speak Korean too.
    DEBIAN_FRONTEND=noninteractive "${as_root[@]}" apt-get install -y -qq --no-install-recommends \
        chromium fonts-noto-cjk >/dev/null
fi

# The packages are installed again whenever the lock file changes; the copy
# of the lock file beside them is written only once `npm ci` has succeeded,
# so an interrupted install is not taken for a finished one.
modules="$PWD/target/widget-test"
if ! cmp -s widget/test/package-lock.json "$modules/installed.lock"; then
    rm -rf "$modules"
    mkdir -p "$modules"
    cp widget/test/package.json widget/test/package-lock.json widget/test/.npmrc "$modules/"
    (cd "$modules" && npm ci --silent)
    cp widget/test/package-lock.json "$modules/installed.lock"
fi

bin="$PWD/target/debug"
prefix="browser_$$_"
cleanup() {
    "$bin/reviews-admin" schema drop --table-prefix "$prefix" >/dev/null 2>&1 || true
}
trap cleanup EXIT

"$bin/reviews-admin" schema create --table-prefix "$prefix" --regions 2 >/dev/null
# 60 products: a listing page of 48 and a few without a review to show.
"$bin/reviews-admin" demo load --table-prefix "$prefix" --users 300 --products 60 --comments 3000 >/dev/null
RUST_LOG=warn "$bin/ranker" run --table-prefix "$prefix" >/dev/null

export WIDGET_TEST_MODULES="$modules/node_modules"
export WIDGET_TEST_QUERY_API="$bin/query-api"
export WIDGET_TEST_TABLE_PREFIX="$prefix"
export WIDGET_TEST_CHROMIUM="${WIDGET_TEST_CHROMIUM:-$(command -v chromium)}"
node --test --test-concurrency=1 --test-reporter=spec widget/test/*.test.mjs
