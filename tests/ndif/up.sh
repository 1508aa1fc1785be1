#!/bin/bash
# Start the local NDIF test server and wait until it serves ladder-4 (install.sh first).
# The stack (stack.sh) runs in a network namespace of its own (netns.py, root only): the host sees
# only the API (127.0.0.1:8001) and the object store (127.0.0.1:9000). NDIF_ISOLATE=0 runs it in the
# host's namespace instead, where some Ray listeners bind 0.0.0.0. Prints READY and the seconds it took,
# or one line saying why not, and exits non-zero. down.sh stops everything, whatever happened.
set -uo pipefail
source "$(dirname "$0")/env.sh"
source "$HERE/procs.sh"
TIMEOUT=${NDIF_UP_TIMEOUT:-300}
T0=$(date +%s)
die() { echo "up.sh: $*" >&2; exit 1; }
[ -x "$LAB/venv/bin/ray" ] || die "no server venv at $LAB/venv; run tests/ndif/install.sh first"
[ -n "$(scan_ours)" ] && die "a previous stack is still running; run tests/ndif/down.sh first"
rm -rf "$RAY_TMP"  # earlier sessions' Ray folders (nothing of ours runs now)
mkdir -p "$NDIF_HOME/logs" "$RAY_TMP"
rm -f "$NDIF_HOME/ready" "$NDIF_HOME/hold" "$NDIF_HOME/faults"  # ndif_cpu_actor.py's hold, netns.py's count
: > "$PIDFILE"
LOG=$NDIF_HOME/logs/stack.log
if [ "${NDIF_ISOLATE:-1}" = 1 ]; then
  setsid python3 "$HERE/netns.py" "$CLIENT_PORTS" bash "$HERE/stack.sh" > "$LOG" 2>&1 &
else
  setsid bash "$HERE/stack.sh" > "$LOG" 2>&1 &
fi
LAUNCHER=$!
echo "$LAUNCHER $(starttime $LAUNCHER) launcher" >> "$PIDFILE"
until [ -f "$NDIF_HOME/ready" ]; do
  kill -0 $LAUNCHER 2>/dev/null && [ "$(awk '{print $3}' /proc/$LAUNCHER/stat 2>/dev/null)" != Z ] \
    || die "$(grep -h -m1 -E '^(stack|netns)\.(sh|py):' "$LOG" || tail -1 "$LOG")"
  [ $(( $(date +%s) - T0 )) -ge $(( TIMEOUT + 60 )) ] && die "not ready after $(( TIMEOUT + 60 )) s (see $LOG)"
  sleep 0.5
done
# the end-to-end check a client makes: the API, through the forwarded port, lists the model
curl -sf "http://127.0.0.1:$NDIF_API_PORT/status" | grep -q ladder-4 \
  || die "the API does not list ladder-4 on 127.0.0.1:$NDIF_API_PORT (see $LOG)"
echo "READY in $(( $(date +%s) - T0 )) s ($( [ "${NDIF_ISOLATE:-1}" = 1 ] && echo "own network namespace" || echo "host network"))"
