#!/bin/bash
# Stop everything up.sh started: every PID in state/pids that is still the same process
# (same start time), plus any process that is ours by procs.sh's test (open files under
# state/, or the env marker) — e.g. Ray workers spawned after up.sh finished. TERM, wait, KILL.
source "$(dirname "$0")/env.sh"
source "$(dirname "$0")/procs.sh"
listed() { [ -f "$PIDFILE" ] && while read -r p st _; do [ -n "$p" ] && [ "$(starttime "$p")" = "$st" ] && echo "$p"; done < "$PIDFILE"; }
targets() { { listed; scan_ours; } | sort -u | grep -vx "$$"; }
t=$(targets)
[ -n "$t" ] && kill -TERM $t 2>/dev/null
for i in $(seq 20); do [ -z "$(targets)" ] && break; sleep 0.5; done
t=$(targets)
[ -n "$t" ] && { echo "down.sh: SIGKILL $(echo $t)"; kill -KILL $t 2>/dev/null; for i in $(seq 20); do [ -z "$(targets)" ] && break; sleep 0.5; done; }
left=$(targets)
if [ -n "$left" ]; then echo "down.sh: still alive: $left"; ps -o pid,stat,cmd -p $(echo $left | tr ' ' ,); exit 1; fi
echo "down.sh: all stopped"
