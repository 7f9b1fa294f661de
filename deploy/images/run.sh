#!/usr/bin/env bash
# Runs an image built by deploy/images/build.sh from its archive, the way a
# container runtime would, on a machine where none can: podman loads the
# archives here, but its runtime (crun) refuses to start a container in this
# sandbox ("setrlimit `RLIMIT_NPROC`: Operation not permitted", and with the
# limits removed from the bundle, "cgroups in hybrid mode not supported").
#
# The archive is unpacked with umoci into target/images/run/IMAGE, and the
# image's entrypoint started from its own configuration (user, environment,
# arguments after the entrypoint's; the working directory is /): as PID 1 of a PID
# namespace of its own, in a mount namespace where the image's root
# filesystem is mounted read-only with /proc and /dev beside it, chrooted
# into it, on the host's network. SIGTERM and SIGINT sent to this script go
# to the entrypoint, and the script exits with the entrypoint's status.
#
# Usage: deploy/images/run.sh [-e NAME=VALUE]... [--entrypoint PATH] IMAGE [ARG...]
#   -e NAME=VALUE      add to (or override in) the image's environment
#   --entrypoint PATH  run this program of the image instead of its entrypoint
# Needs root (namespaces, mounts, chroot) and umoci.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

extra_env=()
entrypoint_override=""
while [[ "${1:-}" == -e || "${1:-}" == --entrypoint ]]; do
  if [[ "$1" == -e ]]; then
    [[ "${2:-}" == *=* ]] || { echo "run.sh: -e takes NAME=VALUE" >&2; exit 2; }
    extra_env+=("$2")
  else
    [[ "${2:-}" == /* ]] || { echo "run.sh: --entrypoint takes an absolute path" >&2; exit 2; }
    entrypoint_override="$2"
  fi
  shift 2
done
image="${1:?usage: deploy/images/run.sh [-e NAME=VALUE]... [--entrypoint PATH] IMAGE [ARG...]}"
shift
archive="target/images/$image.tar"
[[ -f "$archive" ]] || { echo "run.sh: no $archive; build it with deploy/images/build.sh $image" >&2; exit 2; }

bundle="$PWD/target/images/run/$image"
rm -rf "$bundle" "$bundle.layout"
trap 'rm -rf "$bundle" "$bundle.layout"' EXIT
mkdir -p "$bundle.layout"
tar -C "$bundle.layout" -xf "$archive"
tag="$(umoci ls --layout "$bundle.layout" | head -n 1)"
umoci unpack --image "$bundle.layout:$tag" "$bundle" >/dev/null
rm -rf "$bundle.layout"

# The runtime configuration umoci derived from the image's: NUL-separated
# uid, gid, working directory, then the environment, then the arguments.
mapfile -d '' -t process < <(python3 - "$bundle/config.json" <<'EOF'
import json, sys
process = json.load(open(sys.argv[1]))["process"]
fields = [str(process["user"]["uid"]), str(process["user"]["gid"]), process.get("cwd", "/"), str(len(process.get("env", [])))]
sys.stdout.write("\0".join(fields + process.get("env", []) + process["args"]) + "\0")
EOF
)
uid="${process[0]}" gid="${process[1]}" env_count="${process[3]}"
# chroot starts the entrypoint in /, the working directory build.sh gives every image.
[[ "${process[2]}" == / ]] || { echo "run.sh: the image's working directory is ${process[2]}, not /" >&2; exit 2; }
image_env=("${process[@]:4:$env_count}")
entrypoint=("${process[@]:$((4 + env_count))}")
[[ -z "$entrypoint_override" ]] || entrypoint=("$entrypoint_override")

root="$bundle/rootfs"
# Runs inside the new namespaces, as their PID 1 until it execs the
# entrypoint, with the image's environment only: so the host's tools are
# named by their paths.
setup='set -e
root=$1; uid=$2; gid=$3; shift 3
/bin/mount --bind "$root" "$root"
/bin/mount -o remount,bind,ro "$root"
/bin/mount -t proc proc "$root/proc"
/bin/mount --rbind /dev "$root/dev"
exec /usr/sbin/chroot --userspec="$uid:$gid" "$root" "$@"'
unshare --mount --pid --fork --kill-child -- \
  env -i "${image_env[@]}" "${extra_env[@]}" /bin/sh -c "$setup" setup "$root" "$uid" "$gid" \
  "${entrypoint[@]}" "$@" &
runner=$!
# The entrypoint is the runner's only child.
forward() { pkill "-$1" -P "$runner" || true; }
trap 'forward TERM' TERM
trap 'forward INT' INT
status=0
while true; do
  wait "$runner" && status=0 || status=$?
  kill -0 "$runner" 2>/dev/null || break
done
exit "$status"
