# Helpers shared by up.sh / down.sh (sourced after env.sh).
# A process is "ours" when it has a file open under $NDIF_HOME (= $NDIF_LAB/state) or $RAY_TMP:
# every service's stdout/stderr goes to state/logs, and Ray keeps its session files
# (logs, sockets) in $RAY_TMP, so Ray's daemons, workers and actors all qualify.
# (An env-var marker does not work: redis and Ray rewrite their process titles, which
# clobbers /proc/PID/environ.)
starttime() { awk '{print $22}' /proc/$1/stat 2>/dev/null; }
scan_ours() {  # PIDs of live (non-zombie) processes that are ours, excluding the caller
  find /proc/[0-9]*/fd -maxdepth 1 \( -lname "$NDIF_HOME/*" -o -lname "$RAY_TMP/*" \) 2>/dev/null | cut -d/ -f3 | sort -un | while read -r p; do
    [ "$p" = "$$" ] && continue
    case "$(awk '{print $3}' /proc/$p/stat 2>/dev/null)" in ""|Z|X) continue;; esac   # gone or zombie
    echo "$p"
  done
}
