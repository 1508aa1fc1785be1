#!/bin/bash
# The local, CPU-only NDIF stack on 127.0.0.1, deploying the embedded ladder-4 (run by up.sh, inside
# netns.py's network namespace unless NDIF_ISOLATE=0).
# Services: redis :6379, moto S3 :9000, Ray head (GCS :6385, client :10001,
# dashboard :8265), ndif controller (detached Ray actor), API (gunicorn) :8001.
# PIDs are appended to state/pids ("pid starttime role comm"); down.sh kills them all, and
# anything else with a file open under state/ (see procs.sh). Exits non-zero if not ready in time.
set -uo pipefail
source "$(dirname "$0")/env.sh"
TIMEOUT=${NDIF_UP_TIMEOUT:-300}
LOG=$NDIF_HOME/logs
T0=$(date +%s.%N)
die() { echo "stack.sh: $* (see $LOG)" >&2; exit 1; }
cd "$NDIF_HOME"  # nothing of the repo on any server process's path but tests/ndif/lib
wait_port() {  # host port name
  local end=$(( $(date +%s) + TIMEOUT ))
  until (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null; do
    [ "$(date +%s)" -ge "$end" ] && die "$3 not listening on $1:$2 after ${TIMEOUT}s"
    sleep 0.5
  done
}
source "$(dirname "$0")/procs.sh"
record() {  # add every process of ours not yet listed to $PIDFILE as "pid starttime name"
  for p in $(scan_ours); do
    grep -q "^$p " "$PIDFILE" || echo "$p $(starttime $p) $1 $(cat /proc/$p/comm)" >> "$PIDFILE"
  done
}
elapsed() { python3 -c "import time;print(f'{time.time()-$T0:.1f}s')"; }

# 1. Redis (no persistence). ndif sends a result inline on its pubsub up to min(soft, hard/2) of the pubsub
# output-buffer limit (stock: 8 MB) and stages a larger one in the object store for the client to download;
# 256 kB here, so that the tests' larger results (cross-model mapping's residuals) take the download path
# that real NDIF results of a large model take
setsid redis-server --bind 127.0.0.1 --port 6379 --save "" --appendonly no \
  --client-output-buffer-limit "pubsub 1mb 256kb 60" \
  --dir "$NDIF_HOME" --daemonize no > "$LOG/redis.log" 2>&1 &
echo "$! $(starttime $!) redis" >> "$PIDFILE"
# 2. S3 stand-in for RustFS
setsid moto_server -H 127.0.0.1 -p 9000 > "$LOG/moto.log" 2>&1 &
echo "$! $(starttime $!) moto" >> "$PIDFILE"
wait_port 127.0.0.1 6379 redis; wait_port 127.0.0.1 9000 moto
echo "redis+moto up $(elapsed)"

# 3. Ray head: a fake GPU so the controller manages this node; cuda_memory_bytes = 8 GB budget
RES='{"head": 10, "cuda_memory_bytes": 8000000000, "cpu_memory_bytes": 4000000000}'
ray start --head --node-ip-address=127.0.0.1 --port=$NDIF_RAY_HEAD_PORT \
  --ray-client-server-port=10001 --num-cpus=4 --num-gpus=1 --resources="$RES" \
  --include-dashboard=true --dashboard-host=127.0.0.1 --dashboard-port=8265 \
  --temp-dir="$RAY_TMP" --disable-usage-stats > "$LOG/ray.log" 2>&1 || die "ray start failed: $(tail -1 "$LOG/ray.log")"
# ray start daemonizes: record every process it left (found by our env marker)
record ray
wait_port 127.0.0.1 10001 ray-client
echo "ray up $(elapsed)"

# 4. Controller (a detached actor; the launcher exits once it is scheduled)
RAY_ADDRESS=127.0.0.1:$NDIF_RAY_HEAD_PORT python -m ndif.services.ray.deployments.controller.controller \
  > "$LOG/controller.log" 2>&1 || die "controller launch failed"
echo "controller launched $(elapsed)"

# 5. API: gunicorn, bound to loopback (the CLI --bind overrides gunicorn_conf's 0.0.0.0)
NDIF_SERVICE=api setsid gunicorn --config python:ndif.services.api.gunicorn_conf \
  --bind 127.0.0.1:$NDIF_API_PORT ndif.services.api.app:app > "$LOG/api.log" 2>&1 &
echo "$! $(starttime $!) api" >> "$PIDFILE"
wait_port 127.0.0.1 $NDIF_API_PORT api
echo "api listening $(elapsed)"

# 6. Deploy ladder-4 (blocks until the replica is ready or fails). Its model_key is the one the client
# computes for the folder's absolute path (load_model(..., remote=True) sends a local folder as its path).
MODEL=$REPO/data/models/ladder-4
cat > "$NDIF_HOME/models.yaml" <<YAML
models:
  - checkpoint: $MODEL
    task: text-generation
    dtype: float32
    size_bytes: 50000000
    padding_bias: 100000000
    actor_class: ndif_cpu_actor.CPUModelActor
    model_key: 'nnsight.modeling.transformers.TransformersModel:{"repo_id": "$MODEL", "revision": null, "task": "text-generation"}'
YAML
timeout $TIMEOUT ndif deploy -f "$NDIF_HOME/models.yaml" > "$LOG/deploy.log" 2>&1 \
  || { die "deploy failed: $(tail -1 "$LOG/deploy.log")"; }
echo "model deployed $(elapsed)"

# 7. Readiness: the API reports the model as served
end=$(( $(date +%s) + TIMEOUT ))
until curl -sf http://127.0.0.1:$NDIF_API_PORT/status 2>/dev/null | grep -q "ladder-4"; do
  [ "$(date +%s)" -ge "$end" ] && die "/status never listed ladder-4"
  sleep 1
done
# record processes started since (ray workers, controller, model actor, gunicorn workers)
record child
touch "$NDIF_HOME/ready"
echo "stack ready $(elapsed)"
