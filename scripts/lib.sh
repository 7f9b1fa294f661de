# Start-up shared by the scripts that run the release binaries against an
# HBase (scripts/soak.sh, scripts/fault-master-restart.sh, bench/contention.sh,
# bench/ranker.sh, bench/api.sh). Sourced, never run: `source scripts/lib.sh`
# from the repository root, after `set -euo pipefail`.

# use_fault_hbase RUN_DIR THRIFT_PORT ZK_PORT: points hbasectl, and the
# fault script that calls it, at an HBase of the script's own, never the
# shared one: FAULT_RUN_DIR, FAULT_THRIFT_PORT (Thrift2 on the next port)
# and FAULT_ZK_PORT override the defaults given.
use_fault_hbase() {
  export HBASE_RUN_DIR="${FAULT_RUN_DIR:-$1}"
  export HBASE_THRIFT_PORT="${FAULT_THRIFT_PORT:-$2}"
  export HBASE_THRIFT2_PORT="$((HBASE_THRIFT_PORT + 1))"
  export HBASE_ZK_PORT="${FAULT_ZK_PORT:-$3}"
}

# Where the release binaries land.
BIN=target/release

# Builds, in release mode, every binary these scripts run: the demo loader,
# the ranker, the service and the two load generators.
build_release_binaries() {
  cargo build --release --locked -p admin --bin reviews-admin -p ranker --bin ranker \
    -p query-api --bin query-api -p bench --bin soak --bin api-bench --bin anchor --bin page-load
}

# start_query_api PORT LOG HBASE_FLAGS...: starts the release query-api (or
# the binary QUERY_API_BIN names) on 127.0.0.1:PORT in the background, with
# QUERY_API_ENV's K=V words added to its environment, logging to LOG (at
# `warn` unless RUST_LOG or QUERY_API_ENV says otherwise), sets `api_pid`,
# and waits until /readyz answers. Fails, showing the end of LOG, when the
# service exits first or is not ready after 30 s. The caller stops it
# (`kill -TERM "$api_pid"`), in its EXIT trap too.
start_query_api() {
  local port=$1 log=$2
  shift 2
  # shellcheck disable=SC2086 # QUERY_API_ENV is a list of K=V words.
  env RUST_LOG="${RUST_LOG:-warn}" ${QUERY_API_ENV:-} "${QUERY_API_BIN:-$BIN/query-api}" \
    --listen "127.0.0.1:$port" "$@" >"$log" 2>&1 &
  api_pid=$!
  local _
  for _ in $(seq 1 60); do
    curl -fsS "http://127.0.0.1:$port/readyz" >/dev/null 2>&1 && return 0
    if ! kill -0 "$api_pid" 2>/dev/null; then
      echo "query-api exited before it was ready:" >&2
      tail -n 20 "$log" >&2
      return 1
    fi
    sleep 0.5
  done
  echo "query-api on port $port is not ready after 30 s:" >&2
  tail -n 20 "$log" >&2
  return 1
}

# plot_python: prints a Python that has matplotlib, for the benchmark plots:
# $PLOT_PYTHON if set, else a virtualenv under target/plot-venv made (once)
# with matplotlib from PyPI. Fails, saying so in one line, when neither works.
plot_python() {
  if [ -n "${PLOT_PYTHON:-}" ]; then
    echo "$PLOT_PYTHON"
    return 0
  fi
  local venv="$PWD/target/plot-venv"
  if [ ! -x "$venv/bin/python3" ] || ! "$venv/bin/python3" -c 'import matplotlib' 2>/dev/null; then
    if ! { python3 -m venv "$venv" && "$venv/bin/pip" install --quiet matplotlib; } >&2; then
      echo "no plot: could not install matplotlib into $venv" >&2
      return 1
    fi
  fi
  echo "$venv/bin/python3"
}

# stop_fault_run [--kill PID] PID...: the EXIT trap of the fault scripts. Stops the
# processes given (empty ones are skipped: those already stopped), waits for
# them, and deletes the script's separate HBase unless FAULT_KEEP=1.
# A process given with --kill (a ranking run still going) gets SIGKILL: on
# SIGTERM it would first finish the products it holds, which may wait on
# regions nobody serves, and hold this wait as long.
stop_fault_run() {
  local pid
  if [[ "${1:-}" == --kill ]]; then
    if [[ -n "$2" ]]; then kill -KILL "$2" 2>/dev/null || true; fi
    shift 2
  fi
  for pid in "$@"; do
    if [[ -n "$pid" ]]; then kill -TERM "$pid" 2>/dev/null || true; fi
  done
  wait 2>/dev/null || true
  if [[ "${FAULT_KEEP:-0}" != 1 ]]; then
    hbase/hbasectl clean >/dev/null 2>&1 || true
  fi
}

# ensure_debian_package COMMAND PACKAGE: installs Debian's PACKAGE when
# COMMAND is missing (as root, or through sudo). Fails, saying so, when it
# cannot be installed.
ensure_debian_package() {
  local command=$1 package=$2
  command -v "$command" >/dev/null && return 0
  local -a as_root=()
  [ "$(id -u)" -eq 0 ] || as_root=(sudo)
  echo "installing $package from Debian's packages" >&2
  "${as_root[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${as_root[@]}" apt-get install -y -qq --no-install-recommends "$package" >&2
  command -v "$command" >/dev/null || {
    echo "$package is not installed and could not be" >&2
    return 1
  }
}

# ensure_haproxy: installs Debian's haproxy when it is missing, without
# starting the system's own instance: the scripts run theirs, with the
# project's configuration, in the foreground.
ensure_haproxy() {
  ensure_debian_package haproxy haproxy
}

# Whether every region of the cluster (hbase:meta's included) is served by a
# live region server: hbase:meta names no server hbasectl does not know.
all_served() {
  local regions
  regions="$(hbase/hbasectl regions 2>/dev/null)" || return 1
  [[ -n "$regions" ]] && ! grep -q '^rs-?' <<<"$regions"
}

# within SECONDS COMMAND...: runs COMMAND every half second until it
# succeeds, for at most SECONDS (and one more run of COMMAND); fails when
# the time runs out.
within() {
  local most=$1 started=$SECONDS
  shift
  until "$@"; do
    ((SECONDS - started < most)) || return 1
    sleep 0.5
  done
}

# How long a killed region server's regions may take to be served again
# before a fault run stops (wait_all_served).
SERVED_WITHIN_SECS=300

# wait_all_served: waits until every region is served again (all_served), at
# most SERVED_WITHIN_SECS. When the time runs out it fails, printing how many
# region replicas of each table no live server holds and the cluster's
# processes: a region server that died on its own beside the one killed (on
# an overloaded machine, one that lost its ZooKeeper session or ran out of
# heap) leaves regions that only a restart brings back, and the caller would
# wait forever.
wait_all_served() {
  within "$SERVED_WITHIN_SECS" all_served && return 0
  local unserved
  echo "fault: after waiting $SERVED_WITHIN_SECS s, region replicas on no live server, by table:" >&2
  unserved="$(hbase/hbasectl regions 2>/dev/null | awk '$1 == "rs-?" {print $2}' | sort | uniq -c)" || true
  echo "${unserved:-(hbasectl regions gave no answer)}" >&2
  hbase/hbasectl status >&2 || true
  echo "fault: stopping; FAULT_KEEP=1 keeps the cluster running with its data (its logs stay either way)" >&2
  return 1
}
