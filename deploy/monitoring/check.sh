#!/usr/bin/env bash
# Checks the monitoring files with Prometheus' own tool: the rules parse and
# every alert behaves as its unit tests say (firing and not firing). Installs
# Prometheus, promtool and the Pushgateway from Debian's packages first when
# they are missing (the live test, tests/tests/it/monitoring.rs, runs them).
# Run from anywhere; scripts/test.sh runs it.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"

if ! command -v promtool >/dev/null || ! command -v prometheus >/dev/null \
    || ! command -v prometheus-pushgateway >/dev/null; then
    echo "installing Debian's prometheus and prometheus-pushgateway packages" >&2
    as_root=()
    [ "$(id -u)" -eq 0 ] || as_root=(sudo)
    "${as_root[@]}" apt-get update -qq
    # The packages' scripts try to start the services; nothing here wants them running.
    DEBIAN_FRONTEND=noninteractive "${as_root[@]}" apt-get install -y -qq --no-install-recommends \
        prometheus prometheus-pushgateway >/dev/null
fi

promtool check config prometheus.yml
promtool check rules rules/*.yml
promtool test rules tests/*.test.yml
python3 -c 'import json, sys; json.load(open(sys.argv[1]))' grafana/reviews.json
echo "monitoring: rules, alert tests and dashboard OK"
