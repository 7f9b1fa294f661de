#!/usr/bin/env bash
# Jaeger, the trace store the traces test and the demo send spans to, built
# from its Go module with the machine's `go` (no image is pulled):
#
#   scripts/jaeger.sh build   build target/jaeger/jaeger once (about four
#                             minutes on two cores; later calls reuse it) and
#                             print its path
#   scripts/jaeger.sh run     build if needed, then run it in the foreground
#                             (exec: a signal to this script reaches Jaeger)
#                             with deploy/jaeger/jaeger.yaml: OTLP/HTTP on
#                             127.0.0.1:$JAEGER_OTLP_HTTP_PORT [4318], the
#                             query API on $JAEGER_QUERY_PORT [16686] (and
#                             its gRPC twin on $JAEGER_QUERY_GRPC_PORT
#                             [16685]), health on $JAEGER_HEALTH_PORT [13133]
#                             (/status answers 200 once it serves); traces
#                             are kept in memory.
#
# The module (github.com/jaegertracing/jaeger, whose v1.76.0 is Jaeger v2.13)
# comes from the Go module proxy; its own go.mod and go.sum are used as they
# are, so the build is the one its authors pinned.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

JAEGER_MODULE=github.com/jaegertracing/jaeger
JAEGER_VERSION=v1.76.0
out="$PWD/target/jaeger"
binary="$out/jaeger-$JAEGER_VERSION"

build() {
  if [[ -x "$binary" ]]; then
    return 0
  fi
  command -v go >/dev/null || { echo "jaeger.sh: go is not installed" >&2; return 1; }
  mkdir -p "$out"
  # `go install module@version` refuses a module whose go.mod has replace
  # directives, as Jaeger's has: build inside a copy of the module instead.
  local module_dir
  module_dir="$(go mod download -json "$JAEGER_MODULE@$JAEGER_VERSION" | python3 -c 'import json, sys; print(json.load(sys.stdin)["Dir"])')"
  rm -rf "$out/src"
  cp -r "$module_dir" "$out/src"
  chmod -R u+w "$out/src"
  echo "jaeger.sh: building Jaeger $JAEGER_VERSION (a few minutes the first time)" >&2
  (cd "$out/src" && GOFLAGS=-mod=readonly go build -trimpath -ldflags='-s -w' -o "$binary.partial" ./cmd/jaeger)
  mv "$binary.partial" "$binary"
  rm -rf "$out/src"
}

case "${1:-}" in
  build)
    build
    echo "$binary"
    ;;
  run)
    build
    exec "$binary" --config "$PWD/deploy/jaeger/jaeger.yaml"
    ;;
  *)
    sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed -e '$d' -e 's/^# \{0,1\}//' >&2
    exit 2
    ;;
esac
