#!/usr/bin/env bash
# The main job on a fresh machine, end to end against a real local HBase:
# start HBase (resolving it from Maven Central on first use), create the
# tables, load the seeded demo data, rank every product, then serve the
# query API in the foreground (Ctrl-C stops it; HBase keeps running until
# `hbase/hbasectl stop`). The service serves its demo pages (--demo-pages):
# a product page and a listing page showing the review widgets.
#
# Sizes can be changed with DEMO_USERS, DEMO_PRODUCTS, DEMO_COMMENTS; the
# listen address with REVIEWS_API_LISTEN, as for query-api itself
# (default 127.0.0.1:8080).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

hbase/hbasectl start
cargo build --release --locked --bins
bin=target/release

# A few regions per table keyed by a random id, as a real cluster would have.
"$bin/reviews-admin" schema create --regions 4

# The loader recognises a data set it already wrote and then writes nothing,
# so running this script again is cheap.
summary=hbase/run/demo-summary.json
"$bin/reviews-admin" demo load \
  --users "${DEMO_USERS:-2000}" --products "${DEMO_PRODUCTS:-200}" --comments "${DEMO_COMMENTS:-20000}" \
  --summary-json "$summary"

"$bin/ranker" run

listen="${REVIEWS_API_LISTEN:-127.0.0.1:8080}"
python3 - "$summary" "$listen" <<'PY'
import json, sys
summary = json.load(open(sys.argv[1]))
base = "http://" + sys.argv[2]
hot = summary["hottestProducts"][0]["id"]
user = summary["activeUsers"][0]["id"]
print("\nquery-api is starting; open in a browser:")
print(f"  {base}/demo/products/{hot}   a product page with the review widgets (?lang=ko in Korean),")
print("  linking to a listing page of the 48 hottest products with their stars")
print("or try:")
print(f"  curl -s '{base}/v1/products/{hot}/comments?limit=5'")
print(f"  curl -s '{base}/v1/products/{hot}/comments/ranked'")
print(f"  curl -s '{base}/v1/products/{hot}/comments/summary'")
print(f"  curl -s '{base}/v1/users/{user}/comments?limit=5'")
print(f"  curl -s '{base}/product/{hot}/comments/latest?limit=5'")
print(f"  open {base}/docs for the API documentation, {base}/metrics for Prometheus\n")
PY
exec "$bin/query-api" --listen "$listen" --demo-pages
