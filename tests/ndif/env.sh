# Shared environment for the local NDIF stack (sourced by install.sh, up.sh, stack.sh, down.sh).
# The server's venv and state live outside the repo, in NDIF_LAB, so that depthutils is not importable
# on the server (a missing nnsight.register would otherwise go unseen).
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
LAB=${NDIF_LAB:-${XDG_CACHE_HOME:-$HOME/.cache}/depthutils-ndif}
PY=${NDIF_PYTHON:-$(command -v python3.11 || command -v python3)}  # the caller's, before PATH changes
export PATH="$LAB/venv/bin:/usr/sbin:/usr/bin:/sbin:/bin:/usr/local/bin"
export PYTHONPATH=$HERE/lib                    # the CPU model actor, and nothing else of the repo
export NDIF_HOME=$LAB/state
export NDIF_REDIS_URL=redis://127.0.0.1:6379
export NDIF_OBJECT_STORE_URL=http://127.0.0.1:9000
export NDIF_OBJECT_STORE_PUBLIC_URL=http://127.0.0.1:9000
export NDIF_OBJECT_STORE_ACCESS_KEY=testing NDIF_OBJECT_STORE_SECRET_KEY=testing
export NDIF_API_URL=http://127.0.0.1:8001 NDIF_API_PORT=8001 NDIF_API_WORKERS=1
export NDIF_RAY_ADDRESS=ray://127.0.0.1:10001 NDIF_RAY_HEAD_PORT=6385
export NDIF_MODEL_IMPORT_PATH=ndif_cpu_actor.CPUModelActor
export NDIF_DEFAULT_DTYPE=float32
export NDIF_INFLUX_ENABLED=false
unset NDIF_POSTGRES_URL NDIF_LOKI_URL NDIF_INFLUX_URL RAY_ADDRESS NDIF_API_KEY  # no auth; no client key here
export GRPC_ENABLE_FORK_SUPPORT=0
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_HUB_DISABLE_TELEMETRY=1
export RAY_USAGE_STATS_ENABLED=0
# Ray's session folder holds AF_UNIX sockets, whose paths may not exceed 107 bytes: a short folder of its
# own (one per NDIF_LAB) rather than one under a deep NDIF_LAB
export RAY_TMP=/tmp/ndif-ray-$(printf %s "$LAB" | sha1sum | cut -c1-8)
export PIDFILE=$LAB/state/pids
#: the ports a client needs: the API and the object store its results are downloaded from
CLIENT_PORTS="$NDIF_API_PORT,9000"
