#!/usr/bin/env bash
# Builds the container images of the project without a container daemon and
# without pulling a base image: each root filesystem is made from Debian's
# packages (the C library and libgcc the binaries link against, the CA roots,
# the time zones) and the release binaries, and written with umoci as an OCI
# image archive:
#
#   target/images/query-api.tar       query-api (entrypoint), listening on 0.0.0.0:8080
#   target/images/ranker.tar          ranker (entrypoint) and ranker-cron
#   target/images/reviews-admin.tar   reviews-admin (entrypoint)
#
# Every image runs as the non-root user 10001:10001, needs nothing written
# to its root filesystem (run it read-only), has no shell and no package
# manager, and carries the org.opencontainers.image.* labels (version from
# the crate, revision from git, source from IMAGE_SOURCE). When podman is
# installed, each archive is also loaded into it as localhost/reviews/NAME:VERSION.
#
# Usage: deploy/images/build.sh [IMAGE...]   (default: all three)
# Environment (all optional):
#   IMAGE_SOURCE    the org.opencontainers.image.source label
#                   [the git remote "origin", else unset]
#   IMAGE_LOAD      0: do not load the archives into podman [1]
#
# Installs umoci (and binutils' strip) from Debian's packages on first use.
# deploy/images/check.sh runs what this builds against a live HBase.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
source scripts/lib.sh

ensure_debian_package umoci umoci
ensure_debian_package strip binutils

declare -A binaries=(
  [query-api]="query-api"
  [ranker]="ranker ranker-cron"
  [reviews-admin]="reviews-admin"
)
declare -A descriptions=(
  [query-api]="Read-only HTTP service for product reviews: latest pages, user timelines, ranked reviews"
  [ranker]="Batch job that ranks every product's reviews into its ten rank slots, and its nightly scheduler"
  [reviews-admin]="Operator tool for the review tables: schema, demo data, index check"
)
if (($# > 0)); then images=("$@"); else images=(query-api ranker reviews-admin); fi
for image in "${images[@]}"; do
  [[ -n "${binaries[$image]:-}" ]] || { echo "build.sh: no image named $image (query-api, ranker, reviews-admin)" >&2; exit 2; }
done

version="$(sed -n 's/^version = "\(.*\)"/\1/p' query-api/Cargo.toml | head -n 1)"
revision="$(git rev-parse HEAD 2>/dev/null || echo unknown)"
source_url="${IMAGE_SOURCE:-$(git remote get-url origin 2>/dev/null || true)}"
# Every file and the image itself carry the commit's time, so two builds of
# one commit differ only where the compiler's output does.
epoch="$(git log -1 --format=%ct 2>/dev/null || date +%s)"
created="$(date -u -d "@$epoch" +%Y-%m-%dT%H:%M:%SZ)"

out="$PWD/target/images"
work="$out/work"
rm -rf "$work"
mkdir -p "$work/debs" "$work/base"

cargo build --release --locked -p query-api --bin query-api -p ranker --bin ranker -p cron --bin ranker-cron \
  -p admin --bin reviews-admin

# The base layer: only what the binaries load at run time, the CA roots
# and the zone files, taken from the Debian packages this machine's apt
# resolves.
# As root, apt would hand the download to its unprivileged user, who cannot
# write under target/. A fresh machine may have no package lists yet.
download_base_packages() {
  (cd "$work/debs" && apt-get download -o APT::Sandbox::User="$(id -un)" libc6 libgcc-s1 ca-certificates tzdata >/dev/null)
}
if ! download_base_packages 2>/dev/null; then
  if [ "$(id -u)" -eq 0 ]; then apt-get update -qq; else sudo apt-get update -qq; fi
  download_base_packages
fi
extracted="$work/extracted"
for deb in "$work"/debs/*.deb; do dpkg-deb -x "$deb" "$extracted"; done
base="$work/base"
mkdir -p "$base/lib64" "$base/lib/x86_64-linux-gnu" "$base/etc/ssl/certs" "$base/usr/share" \
  "$base/usr/local/bin" "$base/proc" "$base/sys" "$base/dev" "$base/tmp"
chmod 1777 "$base/tmp"
cp -a "$extracted/lib64/ld-linux-x86-64.so.2" "$base/lib64/"
# The libraries every binary needs, by the names the dynamic linker asks for.
needed="$(for bin in query-api ranker ranker-cron reviews-admin; do
  objdump -p "target/release/$bin" | awk '/NEEDED/ { print $2 }'
done | sort -u)"
for library in ld-linux-x86-64.so.2 $needed; do
  source_library="$extracted/lib/x86_64-linux-gnu/$library"
  [[ -e "$source_library" ]] || { echo "build.sh: $library is in none of the base packages" >&2; exit 1; }
  cp -aL "$source_library" "$base/lib/x86_64-linux-gnu/"
done
# What update-ca-certificates would write, without running it in the image.
cat "$extracted"/usr/share/ca-certificates/mozilla/*.crt >"$base/etc/ssl/certs/ca-certificates.crt"
cp -a "$extracted/usr/share/zoneinfo" "$base/usr/share/"
rm -rf "$base/usr/share/zoneinfo/right"
printf 'root:x:0:0:root:/root:/usr/sbin/nologin\nreviews:x:10001:10001:reviews:/nonexistent:/usr/sbin/nologin\n' \
  >"$base/etc/passwd"
printf 'root:x:0:\nreviews:x:10001:\n' >"$base/etc/group"
# glibc's resolver reads this for a service name such as hbase-thrift.reviews.svc.
printf 'hosts: files dns\n' >"$base/etc/nsswitch.conf"
find "$base" -exec touch -h -d "@$epoch" {} +

for image in "${images[@]}"; do
  layer="$work/$image"
  mkdir -p "$layer"
  for bin in ${binaries[$image]}; do
    # Line tables are for a developer's backtraces; the symbols stay, so a
    # panic in production still names its functions.
    strip --strip-debug -o "$layer/$bin" "target/release/$bin"
    touch -d "@$epoch" "$layer/$bin"
  done
  entrypoint="/usr/local/bin/${binaries[$image]%% *}"
  layout="$work/layout-$image"
  umoci init --layout "$layout"
  umoci new --image "$layout:$version"
  umoci insert --image "$layout:$version" --history.created "$created" \
    --history.created_by "Debian packages: libc6 libgcc-s1 ca-certificates tzdata" "$base" /
  umoci insert --image "$layout:$version" --history.created "$created" \
    --history.created_by "the release build of ${binaries[$image]}" "$layer" /usr/local/bin
  config=(
    --created "$created"
    --config.user 10001:10001
    --config.entrypoint "$entrypoint"
    --config.workingdir /
    --config.stopsignal SIGTERM
    --config.env PATH=/usr/local/bin
    --config.env SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt
    --config.label "org.opencontainers.image.title=$image"
    --config.label "org.opencontainers.image.description=${descriptions[$image]}"
    --config.label "org.opencontainers.image.version=$version"
    --config.label "org.opencontainers.image.revision=$revision"
    --config.label "org.opencontainers.image.created=$created"
    --config.label "org.opencontainers.image.licenses=Apache-2.0"
  )
  [[ -n "$source_url" ]] && config+=(--config.label "org.opencontainers.image.source=$source_url")
  if [[ "$image" == query-api ]]; then
    # Inside a container the service must listen beyond loopback.
    config+=(--config.env REVIEWS_API_LISTEN=0.0.0.0:8080 --config.exposedports 8080/tcp)
  fi
  umoci config --image "$layout:$version" "${config[@]}"
  umoci gc --layout "$layout"
  # An OCI archive is the image layout, tarred.
  tar --sort=name --mtime="@$epoch" --owner=0 --group=0 --numeric-owner -C "$layout" -cf "$out/$image.tar" .
  size="$(du -b "$out/$image.tar" | cut -f1)"
  unpacked="$(du -sb "$base" "$layer" | awk '{ total += $1 } END { print total }')"
  awk -v image="$image" -v version="$version" -v size="$size" -v unpacked="$unpacked" 'BEGIN {
    printf "build.sh: target/images/%s.tar: %s %s, %.1f MB compressed, %.1f MB unpacked\n", image, image, version, size / 1e6, unpacked / 1e6
  }' >&2
  if [[ "${IMAGE_LOAD:-1}" == 1 ]] && command -v podman >/dev/null; then
    loaded="$(podman load --quiet -i "$out/$image.tar" | sed -n 's/^Loaded image: //p' | tail -n 1)"
    podman tag "$loaded" "localhost/reviews/$image:$version"
    echo "build.sh: loaded into podman as localhost/reviews/$image:$version" >&2
  fi
done
rm -rf "$work"
