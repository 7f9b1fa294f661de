#!/usr/bin/env bash
# Checks every deployment file in deploy/ (part of scripts/test.sh):
# - each Kubernetes manifest (deploy/*.yaml) against Kubernetes' own schemas,
#   strictly (an unknown field fails), with PyPI's kubernetes-validate, and
#   with the checkov security linter, offline; a check a manifest does not
#   meet is skipped in the manifest itself, with its reason;
# - each systemd unit (deploy/*.service) with `systemd-analyze verify`, its
#   ExecStart pointed at the binary built in target/debug; any complaint
#   (an unknown key, a bad value) fails.
# Then it plants a mistake in a copy of each kind of file (a misspelt field
# in a manifest, a misspelt key in a unit) and fails unless the check
# refuses the copy: a check that passes everything would pass here too.
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
# verify_unit UNIT: systemd-analyze's complaints about UNIT (a copy whose
# ExecStart is the debug build), empty when it has none.
verify_unit() {
  local copy
  copy="$units_dir/$(basename "$1")"
  sed "s|^ExecStart=/usr/local/bin/\([a-z-]*\)|ExecStart=$PWD/target/debug/\1|" "$1" >"$copy"
  systemd-analyze verify "$copy" 2>&1 || true
}
for unit in deploy/*.service; do
  complaints="$(verify_unit "$unit")"
  if [[ -n "$complaints" ]]; then
    echo "check-manifests: $unit: $complaints" >&2
    exit 1
  fi
done
echo "check-manifests: $(echo deploy/*.service) verified by systemd-analyze"

# The planted mistakes.
mkdir -p "$units_dir/planted"
sed 's/^\( *\)readinessProbe:/\1readinesProbe:/' deploy/query-api.yaml >"$units_dir/planted/query-api.yaml"
# Refused for the misspelt field itself, not for any failure of the validator.
refusal="$("$TOOLS/bin/kubernetes-validate" --strict --quiet "$units_dir/planted/query-api.yaml" 2>&1 || true)"
if ! grep -q "'readinesProbe' was unexpected" <<<"$refusal"; then
  echo "check-manifests: a Deployment with a misspelt readinessProbe was not refused for it: $refusal" >&2
  exit 1
fi
sed 's/^Restart=/Restrat=/' deploy/query-api.service >"$units_dir/planted/query-api.service"
if [[ -z "$(verify_unit "$units_dir/planted/query-api.service")" ]]; then
  echo "check-manifests: a unit with a misspelt Restart= passed systemd-analyze" >&2
  exit 1
fi
echo "check-manifests: a misspelt field in a manifest and a misspelt key in a unit are refused"
