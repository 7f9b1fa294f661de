#!/usr/bin/env bash
# Checks every deployment file in deploy/ (part of scripts/test.sh):
# - each Kubernetes manifest (deploy/*.yaml) against Kubernetes' own schemas,
#   strictly (an unknown field fails), with PyPI's kubernetes-validate, and
#   with the checkov security linter, offline; a check a manifest does not
#   meet is skipped in the manifest itself, with its reason;
# - each systemd unit (deploy/*.service) with `systemd-analyze verify`, its
#   ExecStart pointed at the binary built in target/debug; any complaint
#   (an unknown key, a bad value) fails.
# The tools are installed once into a virtualenv under target/ (about a
# minute on a clean clone).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

TOOLS=target/manifest-tools
KUBERNETES_VALIDATE_VERSION=1.37.0
CHECKOV_VERSION=3.3.30

if ! "$TOOLS/bin/kubernetes-validate" --version 2>/dev/null | grep -qx "$KUBERNETES_VALIDATE_VERSION" ||
  ! "$TOOLS/bin/checkov" --version 2>/dev/null | grep -qx "$CHECKOV_VERSION"; then
  echo "check-manifests: installing kubernetes-validate and checkov into $TOOLS" >&2
  python3 -m venv "$TOOLS"
  "$TOOLS/bin/pip" install --quiet --disable-pip-version-check \
    "kubernetes-validate==$KUBERNETES_VALIDATE_VERSION" "checkov==$CHECKOV_VERSION"
fi

manifests=(deploy/*.yaml)
"$TOOLS/bin/kubernetes-validate" --strict --quiet "${manifests[@]}"
echo "check-manifests: ${manifests[*]} valid against Kubernetes $KUBERNETES_VALIDATE_VERSION's schemas"

files=()
for manifest in "${manifests[@]}"; do files+=(-f "$manifest"); done
# Offline: no download of newer checks, no mapping of check ids from the vendor's API.
BC_SKIP_MAPPING=TRUE "$TOOLS/bin/checkov" --quiet --compact --skip-download --framework kubernetes "${files[@]}"
echo "check-manifests: checkov passed (skips are in the manifests, with their reasons)"

command -v systemd-analyze >/dev/null || {
  echo "check-manifests: systemd-analyze is missing (Debian's systemd package)" >&2
  exit 1
}
units_dir="$(mktemp -d)"
trap 'rm -rf "$units_dir"' EXIT
for unit in deploy/*.service; do
  sed "s|^ExecStart=/usr/local/bin/\([a-z-]*\)|ExecStart=$PWD/target/debug/\1|" "$unit" >"$units_dir/$(basename "$unit")"
  complaints="$(systemd-analyze verify "$units_dir/$(basename "$unit")" 2>&1)" || true
  if [[ -n "$complaints" ]]; then
    echo "check-manifests: $unit: $complaints" >&2
    exit 1
  fi
done
echo "check-manifests: $(echo deploy/*.service) verified by systemd-analyze"
