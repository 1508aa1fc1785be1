#!/bin/bash
# Install the local NDIF server: Debian's redis-server (apt, as root, when missing) and a venv at
# $NDIF_LAB/venv from requirements.txt (every package pinned). Idempotent: a venv whose stamp matches
# requirements.txt is kept; a second install waits for the first. Prints one line on failure and exits non-zero.
set -uo pipefail
source "$(dirname "$0")/env.sh"
die() { echo "install.sh: $*" >&2; exit 1; }
T0=$(date +%s)
mkdir -p "$LAB" || die "cannot create $LAB (set NDIF_LAB to a writable folder)"
# one install at a time: the test run starts one in the background (tests/conftest.py), the fixture waits on it here
exec 9>"$LAB/.install.lock" && flock 9 || die "cannot lock $LAB/.install.lock"
if ! command -v redis-server >/dev/null 2>&1; then
  [ "$(id -u)" = 0 ] || die "redis-server is missing and only root can apt-get it (apt-get install redis-server)"
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server; } \
    > "$LAB/apt.log" 2>&1 || die "apt-get install redis-server failed (see $LAB/apt.log)"
fi
STAMP=$LAB/venv/.requirements.sha256
WANT=$(sha256sum "$HERE/requirements.txt" | cut -d' ' -f1)
if [ "$(cat "$STAMP" 2>/dev/null)" != "$WANT" ]; then
  command -v "$PY" >/dev/null || die "$PY not found (set NDIF_PYTHON to a Python 3.11 or newer)"
  rm -rf "$LAB/venv"
  "$PY" -m venv "$LAB/venv" || die "cannot create a venv at $LAB/venv"
  # ndif 0.1.2 declares Python >= 3.12 but runs on 3.11; every version is pinned, so nothing floats
  "$LAB/venv/bin/pip" install -q --disable-pip-version-check --ignore-requires-python --prefer-binary \
      -r "$HERE/requirements.txt" > "$LAB/pip.log" 2>&1 \
    || die "pip could not install the server's requirements (registry down? see $LAB/pip.log)"
  echo "$WANT" > "$STAMP"
fi
(cd / && "$LAB/venv/bin/python" -c "import depthutils")  2>/dev/null && die "depthutils is importable on the server; it must not be"
echo "installed in $(( $(date +%s) - T0 )) s: $LAB/venv ($(du -sh "$LAB/venv" | cut -f1)), $(redis-server --version | cut -d' ' -f1-3)"
