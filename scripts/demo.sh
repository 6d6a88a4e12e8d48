#!/usr/bin/env bash
# The main job on built-in defaults: start hugeroomd, boot guests with the
# virtio-hugeroom device and driver, show what hugeroomctl sees, clean up.
. "$(dirname "$0")/lib.sh"
need_root
bash "$HR_SCRIPTS/prepare.sh"
export HUGEROOM_BUILD=${HUGEROOM_BUILD:-$HR_REPO/build}
exec /usr/bin/python3 "$HR_SCRIPTS/demo.py" "$@"
