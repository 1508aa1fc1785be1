# Shared environment for the local NDIF stack (sourced by up.sh / down.sh).
LAB=${NDIF_LAB:-/work/ndif_lab}  # the server venv and its state live here, outside the repo
export PATH="$LAB/venv/bin:/usr/bin:/bin:/usr/local/bin"
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
unset NDIF_POSTGRES_URL NDIF_LOKI_URL NDIF_INFLUX_URL RAY_ADDRESS
export GRPC_ENABLE_FORK_SUPPORT=0
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_HUB_DISABLE_TELEMETRY=1
export RAY_USAGE_STATS_ENABLED=0
export RAY_TMP=$LAB/state/ray
export PIDFILE=$LAB/state/pids
