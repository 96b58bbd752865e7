#!/usr/bin/env bash
# colocd itself end to end on one GPU (tools/gpu-harness/README.md#end-to-end):
#
#   OUT=/path/to/results bash tools/gpu-harness/e2e.sh        # on a GPU host
#   BACKEND=fake bash tools/gpu-harness/e2e.sh                # dry run, no GPU (make harness-test)
#
# Starts `colocd serve` on the GPU (gpu.backend nvml) managing its own MPS
# control daemon in a pipe and log directory of its own, the harness's
# inference worker as an MPS client and trainers under `colocd run`, and
# records each check as pass, fail or skip with its figures in
# $OUT/results.json and $OUT/results.md (with $OUT/e2e.log and
# $OUT/e2e-logs.tar.gz). The GPU's settings are never changed: no compute
# mode, clocks, MIG or reset. The whole run is under one hard timeout
# (at most 10 minutes with the clean-up) and each wait has its own bound; every process
# it starts is ended on exit, and the daemon is quit through its own pipe
# directory.
#
# BACKEND=fake runs the same steps against colocd's simulated GPU
# (gpu.backend sim), the project's fake nvidia-cuda-mps-control
# (mps/internal/fakemps, built here and put first on PATH) and the
# harness's fake workers; it exits 1 unless every step gives what
# e2e_util.STEPS expects of a dry run.
#
# Environment:
#   OUT       where the results go (default ./e2e-out)
#   BACKEND   gpu (default) or fake
#   COLOCD    the colocd binary (default bin/colocd, else tools/gpu-harness/bin/colocd)
#   PYTHON    the interpreter (with torch on a GPU; default python3)
#   HARD_S    hard timeout of the steps in seconds (at most and by default 540, on a
#             GPU and dry), and 60 s more for the clean-up
#   TRAIN, INFER   the harness's workloads (default resnet50-train, bert-infer)
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
BACKEND=${BACKEND:-gpu}
case "$BACKEND" in gpu | fake) ;; *) echo "e2e.sh: BACKEND must be gpu or fake, got $BACKEND" >&2; exit 2 ;; esac
HARD_S=${HARD_S:-540} # the dry run too: it takes 2 minutes idle, 4 and more beside other jobs
if [ "$HARD_S" -gt 540 ]; then HARD_S=540; fi # + 60 s for the clean-up: at most 10 minutes
OUT=${OUT:-$PWD/e2e-out}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
export OUT

# The hard timeout: the script runs again under timeout(1), which signals
# its whole process group (every process started here) when time is up;
# the trap below then cleans up, within the 60 s before SIGKILL. tee is
# outside that group, so the log keeps the clean-up's lines.
if [ -z "${E2E_INNER:-}" ]; then
    export E2E_INNER=1
    set +e
    timeout -k 60 "$HARD_S" bash "${BASH_SOURCE[0]}" "$@" 2>&1 | tee "$OUT/e2e.log"
    rc=${PIPESTATUS[0]}
    [ "$rc" -eq 124 ] && echo "e2e.sh: hard timeout of $HARD_S s reached" | tee -a "$OUT/e2e.log"
    exit "$rc"
fi

PY_CMD=${PYTHON:-python3}
# The interpreter itself, not a shim that finds it on every call (the
# other user's worker runs PY_CMD: the interpreter may be in root's home).
PY=$("$PY_CMD" -c 'import sys; print(sys.executable)')
TRAIN=${TRAIN:-resnet50-train}
INFER=${INFER:-bert-infer}
if [ -z "${COLOCD:-}" ]; then
    COLOCD=$REPO/bin/colocd
    [ -x "$COLOCD" ] || COLOCD=$HERE/bin/colocd
fi
COLOCD=$(cd "$(dirname "$COLOCD")" && pwd)/$(basename "$COLOCD")
export COLOCD
WORK=$(mktemp -d /tmp/colocd-e2e.XXXXXX)
chmod 711 "$WORK" # another user's worker (other_uid_register) reaches $WORK/uid only
RES=$WORK/res
PIPE=$WORK/mps-pipe
LOGD=$WORK/mps-log
CFG=$WORK/colocd.yaml
mkdir -p "$RES" "$WORK/data" "$WORK/logs"
chmod 700 "$WORK/data"
export PYTHONUNBUFFERED=1
T_START=$(date +%s)

INF_PROFILE=$REPO/testdata/gpu/h200/profiles/$INFER.json
TRAIN_PROFILE=$REPO/testdata/gpu/h200/profiles/$TRAIN.json
RATE=50
MEM_MIB=12000
if [ "$BACKEND" = fake ]; then
    GPU_BACKEND=sim W_TIMEOUT=20 MEASURE_S=1 DEADLINE=3 SETTLE=0.5 REG_WAIT=5 POST=1
    FAKEBIN=$WORK/fakebin
    mkdir -p "$FAKEBIN"
    (cd "$REPO" && go build -o "$FAKEBIN/nvidia-cuda-mps-control" ./mps/internal/fakemps)
    export PATH=$FAKEBIN:$PATH
    MPS_CONTROL=$FAKEBIN/nvidia-cuda-mps-control
    export E2E_MPS_CONTROL=$MPS_CONTROL E2E_MPS_LOG_DIRECTORY=$LOGD FAKE_TIME_SCALE=1
else
    GPU_BACKEND=nvml W_TIMEOUT=150 MEASURE_S=8 DEADLINE=45 SETTLE=5 REG_WAIT=15 POST=3
    MPS_CONTROL=nvidia-cuda-mps-control
fi

log() { echo "[$(date -u +%H:%M:%S) +$(($(date +%s) - T_START))s] $*"; }
U() { "$PY" "$HERE/e2e_util.py" "$@"; }
rec() { U record "$RES" "$@"; }
ctl() { # one MPS control command, with the daemon's own directories
    echo "$1" | CUDA_MPS_PIPE_DIRECTORY=$PIPE CUDA_MPS_LOG_DIRECTORY=$LOGD timeout 15 "$MPS_CONTROL"
}
alive() { kill -0 "$1" 2>/dev/null; }
wait_gone() { # PID SECONDS: 0 when it is gone in time
    local end=$(($(date +%s) + $2))
    while alive "$1"; do
        [ "$(date +%s)" -ge "$end" ] && return 1
        sleep 0.2
    done
}
EXIT_RC=
exit_status() { # PID SECONDS of a child: EXIT_RC is its exit status once it ended in time, else 255
    EXIT_RC=0
    if wait_gone "$1" "$2"; then wait "$1" || EXIT_RC=$?; else EXIT_RC=255; fi
}
daemon_pid() { cat "$PIPE/nvidia-cuda-mps-control.pid" 2>/dev/null | tr -d ' \n' || true; }
js() { U get "$@" 2>/dev/null || echo null; }
now() { date +%s.%N; }
since() { "$PY" -c "import sys; print(round($(now) - $1, 3))"; }

PIDS=()      # everything started, ended in reverse order on exit
STOPPED=()   # launchers paused with SIGSTOP (continued before they are ended)
track() { PIDS+=("$1"); }

cleanup() {
    local rc=$?
    set +e
    trap - EXIT INT TERM
    trap "" PIPE
    log "cleanup (status $rc)"
    for p in "${STOPPED[@]}"; do kill -CONT "$p" 2>/dev/null; done
    local i
    for ((i = ${#PIDS[@]} - 1; i >= 0; i--)); do
        alive "${PIDS[i]}" && kill -TERM "${PIDS[i]}" 2>/dev/null
    done
    local end=$(($(date +%s) + 20))
    for p in "${PIDS[@]}"; do
        wait_gone "$p" $((end - $(date +%s))) || { log "pid $p did not end on SIGTERM: SIGKILL"; kill -KILL "$p" 2>/dev/null; }
    done
    if [ -n "$(daemon_pid)" ] && alive "$(daemon_pid)"; then
        log "quitting the MPS daemon of $PIPE"
        ctl quit || log "quit failed"
    fi
    local orphans
    orphans=$(our_servers)
    if [ -n "$orphans" ]; then
        # A server whose control daemon was killed (daemon_recovery) and
        # that no quit reached; every client of this run has ended by now.
        log "MPS servers of $PIPE left: $orphans: SIGTERM"
        for p in ${orphans//,/ }; do kill -TERM "$p" 2>/dev/null; done
    fi
    meta_write "$rc"
    U report "$RES" "$OUT" || true
    cp "$RES/steps.jsonl" "$OUT/steps.jsonl" 2>/dev/null
    tar -C "$WORK" -czf "$OUT/e2e-logs.tar.gz" --exclude=data --exclude=fakebin . 2>/dev/null
    local final=$rc
    if [ "$BACKEND" = fake ]; then
        U check "$RES" || final=1
    fi
    log "results: $OUT/results.json, $OUT/results.md (exit $final)"
    cat "$OUT/results.md"
    rm -rf "$WORK"
    exit "$final"
}
trap cleanup EXIT
trap 'exit 143' TERM
trap 'exit 130' INT

DEVICE_JSON='{}'
meta_write() {
    "$PY" - "$RES/meta.json" "$BACKEND" "$DEVICE_JSON" "$T_START" "$1" <<'EOF'
import json, sys, time
path, backend, device, t0, rc = sys.argv[1:]
json.dump({"backend": backend, "device": json.loads(device), "exit": int(rc),
           "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(int(t0))),
           "wall_s": int(time.time()) - int(t0)}, open(path, "w"))
EOF
}

write_config() { # SLO_MS: the config file, replaced by a rename (a hot reload)
    cat >"$CFG.tmp" <<EOF
# written by tools/gpu-harness/e2e.sh ($BACKEND)
sidecar: {id: e2e, data_dir: $WORK/data}
nats: {listen: "127.0.0.1:0"}
gpu: {backend: $GPU_BACKEND, device: "0", sim: {name: NVIDIA H200}}
sharing: {mode: mps}
mps: {control: $MPS_CONTROL, pipe_dir: $PIPE, log_dir: $LOGD, manage_daemon: true,
      default_active_thread_pct: 100, quit_on_close: false, command_timeout: 10s}
predictor: {requests: 500, seed: 1, confidence: 0}
services:
  - {name: infer, profile: $INF_PROFILE, rate_rps: $RATE, slo: {p99_ms: $1}}
admission:
  headroom: 0.1
  max_jobs: 4
  pct_step: 5
  lease: {default: 5m, max: 1h, first_term: 2m}
  guard: {deadline: ${DEADLINE}s, revoke_after: 2s, max_revokes_per_hour: 50, grant_before_measured: true}
telemetry: {http: "127.0.0.1:0", tracing: none}
EOF
    mv -f "$CFG.tmp" "$CFG"
}

worker() { # ROLE WORKLOAD STATUS [ARGS...]: the command line of a harness worker
    local role=$1 wl=$2 st=$3
    shift 3
    local b=torch
    [ "$BACKEND" = fake ] && b=fake
    echo "$PY" "$HERE/e2e_worker.py" --role "$role" --backend "$b" --workload "$wl" --status "$st" "$@"
}

start_run() { # JOB NAME [run flags] -- [worker flags]: a trainer under colocd run, in the background
    local job=$1 name=$2
    shift 2
    local rflags=() wflags=()
    while [ $# -gt 0 ] && [ "$1" != -- ]; do rflags+=("$1"); shift; done
    [ $# -gt 0 ] && shift
    wflags=("$@")
    # shellcheck disable=SC2046
    "$COLOCD" run --sidecar e2e --job "$job" --profile "$TRAIN_PROFILE" --min-pct 10 --memory-mib "$MEM_MIB" \
        --json --grace 10s --pass-token "${rflags[@]}" -- $(worker training "$TRAIN" "$WORK/$name.json") "${wflags[@]}" \
        >"$WORK/logs/$name.out" 2>"$WORK/logs/$name.err" &
    RUN_PID=$!
    track "$RUN_PID"
}

REG_BY= REG_FAILED=
registered() { # NAME: whether colocd run registered its worker's current pid (REG_BY=run); if it
    # did not within REG_WAIT s, the script registers it with the lease's id and token (in
    # the worker's environment through --pass-token), so that the later steps still measure:
    # REG_BY=script, or none if that is refused too. REG_FAILED: run's register_failed lines.
    local name=$1 pid lid tok
    pid=$(js "$WORK/$name.json" 'd["pid"]')
    REG_BY=none
    if U events-wait "$WORK/logs/$name.err" --timeout "$REG_WAIT" \
        --cond "any(e['event'] == 'registered' and $pid in e.get('pids', []) for e in ev)" 2>/dev/null; then
        REG_BY=run
    else
        lid=$(tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | sed -n 's/^COLOCD_LEASE_ID=//p')
        tok=$(tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | sed -n 's/^COLOCD_LEASE_TOKEN=//p')
        if [ -n "$lid" ] && [ -n "$tok" ] && "$COLOCD" register --lease "$lid" --token "$tok" "$pid"; then
            REG_BY=script
        fi
        log "colocd run did not register pid $pid of $name within $REG_WAIT s: registered by $REG_BY"
    fi
    REG_FAILED=$(js "$WORK/logs/$name.err" '[e.get("message", "")[:200] for e in ev if e["event"] == "register_failed"]')
}

our_servers() { # the MPS servers of this run's pipe directory still running (a GPU host)
    local p out=""
    [ "$BACKEND" = gpu ] || return 0
    for p in $(pgrep -f nvidia-cuda-mps-server || true); do
        tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "CUDA_MPS_PIPE_DIRECTORY=$PIPE" && out+="$p,"
    done
    echo "${out%,}"
}

mps_clients() { ctl ps 2>/dev/null | awk 'NR > 1 {print $1}' | paste -sd, - || true; }

measure_rate() { # STATUS: after SETTLE, the worker's units per second over MEASURE_S, or null
    sleep "$SETTLE"
    U rate "$1" "$MEASURE_S" | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["rate"])' || echo null
}
ratio_to_100() { # RATE: RATE over RATE100 to 3 places, or None when either is unknown
    "$PY" -c "print(round($1 / $RATE100, 3) if '$1' not in ('null','None') and '$RATE100' not in ('null','None') else None)"
}

# ---------------------------------------------------------------- device
log "e2e: backend $BACKEND, colocd $COLOCD, work $WORK, hard timeout $HARD_S s"
"$COLOCD" --version
if [ "$BACKEND" = gpu ]; then
    if ! command -v nvidia-smi >/dev/null; then
        rec device fail --reason "nvidia-smi not found: no GPU here (BACKEND=fake for a dry run)"
        exit 1
    fi
    nvidia-smi | tee "$WORK/logs/nvidia-smi.txt"
    q=$(nvidia-smi -i 0 --query-gpu=name,uuid,memory.total,memory.used,compute_mode,mig.mode.current,driver_version \
        --format=csv,noheader,nounits)
    IFS=, read -r G_NAME G_UUID G_TOTAL G_USED G_CMODE G_MIG G_DRIVER <<<"$q"
    G_NAME=$(echo "$G_NAME" | xargs) G_UUID=$(echo "$G_UUID" | xargs) G_TOTAL=$(echo "$G_TOTAL" | xargs)
    G_CMODE=$(echo "$G_CMODE" | xargs) G_MIG=$(echo "$G_MIG" | xargs)
    case "$G_NAME" in *H200*) KIND=H200 ;; *H100*) KIND=H100 ;; *) KIND=other ;; esac
    DEVICE_JSON=$("$PY" -c 'import json,sys; print(json.dumps(dict(zip(["name","uuid","memory_total_mib","memory_used_mib","compute_mode","mig","driver","kind"], sys.argv[1:]))))' \
        "$G_NAME" "$G_UUID" "$G_TOTAL" "$(echo "$G_USED" | xargs)" "$G_CMODE" "$G_MIG" "$(echo "$G_DRIVER" | xargs)" "$KIND")
    if [ "$G_MIG" = Enabled ]; then
        rec device fail --reason "MIG is enabled on GPU 0: this run needs a whole GPU (its settings are not changed)" \
            name="\"$G_NAME\"" mig="\"$G_MIG\""
        exit 1
    fi
    st=pass reason="an $KIND, as this run is sized for"
    [ "$KIND" = other ] && reason="neither an H100 nor an H200: figures are for $G_NAME"
    rec device "$st" --reason "$reason" name="\"$G_NAME\"" kind="\"$KIND\"" uuid="\"$G_UUID\"" memory_total_mib="$G_TOTAL" \
        compute_mode="\"$G_CMODE\"" mig="\"$G_MIG\""
    [ "$KIND" = H100 ] && [ ! -e "$REPO/testdata/gpu/h100" ] && log "note: the profiles are the H200's ($INF_PROFILE)"
    "$PY" -c 'import torch; assert torch.cuda.is_available(); print("torch", torch.__version__, torch.cuda.get_device_name(0))'
else
    DEVICE_JSON='{"name": "NVIDIA H200 (simulated)", "kind": "sim"}'
    rec device pass --reason "simulated GPU (gpu.backend sim), fake MPS control program $MPS_CONTROL" name='"NVIDIA H200"' kind='"sim"'
fi

# ---------------------------------------------------------------- serve_ready
write_config 1000
t0=$(now)
"$COLOCD" serve --config "$CFG" >"$WORK/logs/serve.out" 2>"$WORK/logs/serve.log" &
SERVE_PID=$!
track "$SERVE_PID"
for _ in $(seq 1 150); do
    grep -q "launchers connect with" "$WORK/logs/serve.out" 2>/dev/null && break
    alive "$SERVE_PID" || break
    sleep 0.2
done
COLOCD_SERVER=$(sed -n 's/.* nats \(nats:[^ ]*\) .*/\1/p' "$WORK/logs/serve.out" | head -1)
export COLOCD_SERVER COLOCD_NKEY=$WORK/data/launcher.nk COLOCD_SIDECAR=e2e
if [ -z "$COLOCD_SERVER" ] || ! U status-wait --timeout 60 --cond 's["ready"] and s["health"].get("mps") == "ok"' --save "$RES/status-ready.json"; then
    tail -30 "$WORK/logs/serve.log"
    rec serve_ready fail --reason "colocd serve not ready with a healthy MPS daemon within 60 s (serve.log)"
    exit 1
fi
DPID=$(daemon_pid)
owner=false
[ -e "$PIPE/colocd.owner" ] && owner=true
if [ -n "$DPID" ] && alive "$DPID" && [ "$owner" = true ]; then
    rec serve_ready pass --reason "colocd started its own MPS daemon in $PIPE and is ready" seconds="$(since "$t0")" \
        daemon_pid="$DPID" owner_marker=true nats="\"$COLOCD_SERVER\""
else
    rec serve_ready fail --reason "ready, but no daemon of colocd's own in $PIPE" daemon_pid="\"$DPID\"" owner_marker="$owner"
fi

# ---------------------------------------------------------------- inference_client
t0=$(now)
# shellcheck disable=SC2046
CUDA_MPS_PIPE_DIRECTORY=$PIPE CUDA_MPS_LOG_DIRECTORY=$LOGD $(worker inference "$INFER" "$WORK/infer.json" --rate "$RATE") \
    >"$WORK/logs/infer.out" 2>"$WORK/logs/infer.err" &
INF_PID=$!
track "$INF_PID"
if U json-wait "$WORK/infer.json" --timeout "$W_TIMEOUT" --cond 'd["state"] == "running" and d["units"] > 5'; then
    sleep 1
    clients=$(mps_clients)
    if [[ ",$clients," == *",$INF_PID,"* ]]; then
        rec inference_client pass --reason "the inference worker serves as a client of colocd's MPS daemon" \
            pid="$INF_PID" seconds="$(since "$t0")" mps_clients="\"$clients\"" \
            latency_ms="$(js "$WORK/infer.json" 'd.get("latency_ms")')" rate="$(js "$WORK/infer.json" 'd["rate"]')"
    else
        rec inference_client fail --reason "the inference worker runs but is not in the daemon's ps" pid="$INF_PID" mps_clients="\"$clients\""
    fi
else
    rec inference_client fail --reason "the inference worker did not serve within $W_TIMEOUT s" state="$(js "$WORK/infer.json" 'd')"
    exit 1
fi

# ---------------------------------------------------------------- status_nvml
"$COLOCD" status --timeout 5s | tee "$WORK/logs/status.txt" || true
U status-wait --timeout 10 --cond 's["gpu"]["memory_total_mib"] > 0' --save "$RES/status.json" || true
S_NAME=$(js "$RES/status.json" 'd["gpu"]["name"]')
S_UUID=$(js "$RES/status.json" 'd["gpu"]["uuid"]')
S_TOTAL=$(js "$RES/status.json" 'd["gpu"]["memory_total_mib"]')
S_FREE=$(js "$RES/status.json" 'd["gpu"]["memory_free_mib"]')
figs=(name="\"$S_NAME\"" uuid="\"$S_UUID\"" memory_total_mib="$S_TOTAL" memory_free_mib="$S_FREE"
    processes_field="$(js "$RES/status.json" '"processes" in d["gpu"] or "processes" in d')")
if [ "$BACKEND" = gpu ]; then
    G_USED_NOW=$(nvidia-smi -i 0 --query-gpu=memory.used --format=csv,noheader,nounits | xargs)
    apps=$(nvidia-smi -i 0 --query-compute-apps=pid,process_name,used_memory --format=csv,noheader | paste -sd';' -)
    figs+=(smi_memory_total_mib="$G_TOTAL" smi_memory_used_mib="$G_USED_NOW" smi_compute_apps="\"$apps\"")
    ok=$("$PY" -c "n,u,t,f,gn,gu,gt,gused=$(printf '%s,' "\"$S_NAME\"" "\"$S_UUID\"" "$S_TOTAL" "$S_FREE" "\"$G_NAME\"" "\"$G_UUID\"" "$G_TOTAL" "$G_USED_NOW")
print(n == gn and u == gu and abs(t - gt) <= 0.01 * gt and abs((t - f) - gused) <= max(256, 0.02 * gt))")
    if [ "$ok" = True ]; then
        rec status_nvml pass --reason "status shows NVML's name, UUID and memory as nvidia-smi does (used within 2 %)" "${figs[@]}"
    else
        rec status_nvml fail --reason "status disagrees with nvidia-smi on name, UUID or memory" "${figs[@]}"
    fi
else
    if [ "$S_NAME" = "NVIDIA H200" ] && [[ "$S_UUID" == GPU-* ]] && [ "$S_TOTAL" -gt 0 ] && [ "$S_FREE" -le "$S_TOTAL" ]; then
        rec status_nvml pass --reason "the simulated device's name, UUID and memory in status (NVML itself: GPU only)" "${figs[@]}"
    else
        rec status_nvml fail --reason "status does not show the simulated device" "${figs[@]}"
    fi
fi

# ---------------------------------------------------------------- baseline_100
# shellcheck disable=SC2046
CUDA_MPS_PIPE_DIRECTORY=$PIPE CUDA_MPS_LOG_DIRECTORY=$LOGD CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=100 \
    $(worker training "$TRAIN" "$WORK/train-100.json") >"$WORK/logs/train-100.out" 2>"$WORK/logs/train-100.err" &
B_PID=$!
track "$B_PID"
RATE100=null
if U json-wait "$WORK/train-100.json" --timeout "$W_TIMEOUT" --cond 'd["state"] == "running" and d["units"] >= 3'; then
    RATE100=$(measure_rate "$WORK/train-100.json")
fi
kill -TERM "$B_PID" 2>/dev/null || true
wait_gone "$B_PID" 30 || true
if [ "$RATE100" != null ] && [ "$RATE100" != None ]; then
    rec baseline_100 pass --reason "the trainer at 100 % beside the inference worker, not under colocd" \
        iters_per_s="$RATE100" pct='"100"'
else
    rec baseline_100 fail --reason "no throughput from the trainer at 100 %" state="$(js "$WORK/train-100.json" 'd')"
fi

# ---------------------------------------------------------------- grant_pct
# The service's p99 as colocd's own admission predicts it at fixed
# percentages, and the SLOs that grant, throttle and leave no room. The
# quote ends as soon as the one sidecar answers; 8 s is for a busy machine.
quotes="{"
for p in 10 20 50 100; do
    if ! q=$("$COLOCD" quote --job q --profile "$TRAIN_PROFILE" --min-pct "$p" --max-pct "$p" --memory-mib "$MEM_MIB" --json --wait 8s --timeout 10s); then
        rec grant_pct fail --reason "colocd quote failed at $p % (no SLOs to test with)"
        exit 1
    fi
    quotes+="\"$p\": $q,"
done
echo "${quotes%,}}" >"$RES/quotes.json"
U slos "$RES/quotes.json" >"$RES/slos.json" || { rec grant_pct fail --reason "no SLOs from the quotes (quotes.json)"; exit 1; }
cat "$RES/slos.json"
SLO_GRANT=$(js "$RES/slos.json" 'd["grant"]')
SLO_THROTTLE=$(js "$RES/slos.json" 'd["throttle"]')
SLO_REVOKE=$(js "$RES/slos.json" 'd["revoke"]')
write_config "$SLO_GRANT"
U status-wait --timeout 15 --cond "abs(s['services'][0]['slo_p99_ms'] - $SLO_GRANT) < 1e-6" >/dev/null ||
    log "the SLO of $SLO_GRANT ms is not in status 15 s after the config was replaced"
t0=$(now)
start_run train-a train-a --max-pct 50
RUN_A=$RUN_PID
GRANT_PCT=null
if U json-wait "$WORK/train-a.json" --timeout "$W_TIMEOUT" --cond 'd["state"] == "running" and d["units"] >= 3'; then
    GRANT_PCT=$(js "$WORK/logs/train-a.err" '[e for e in ev if e["event"] == "admitted"][0]["pct"]')
    A1=$(js "$WORK/train-a.json" 'd["pid"]')
    registered train-a
    R=$(measure_rate "$WORK/train-a.json")
    ENV_PCT=$(js "$WORK/train-a.json" 'd["pct"]')
    U status-wait --timeout 10 --cond 'len(s["leases"]) == 1' --save "$RES/status-grant.json" || true
    S_PCT=$(js "$RES/status-grant.json" 'd["leases"][0]["active_thread_pct"]')
    clients=$(mps_clients)
    ratio=$(ratio_to_100 "$R")
    figs=(granted_pct="$GRANT_PCT" client_env_pct="\"$ENV_PCT\"" status_pct="$S_PCT" pid="$A1" iters_per_s="$R"
        iters_per_s_at_100="$RATE100" ratio="$ratio" mps_client="$([[ ",$clients," == *",$A1,"* ]] && echo true || echo false)"
        registered_by="\"$REG_BY\"" register_failed="$REG_FAILED"
        seconds_to_registered="$(js "$WORK/logs/train-a.err" '[e for e in ev if e["event"] == "registered"][0]["seconds"]')")
    if [ "$REG_BY" = run ] && [ "$ENV_PCT" = "$GRANT_PCT" ] && [ "$S_PCT" = "$GRANT_PCT" ] && [ "$GRANT_PCT" -lt 100 ] &&
        [[ ",$clients," == *",$A1,"* ]] && "$PY" -c "import sys; r = '$ratio'; sys.exit(0 if r not in ('None', 'null') and float(r) < 0.9 else 1)"; then
        why="granted $GRANT_PCT %: the client runs with it and trains at $ratio of its speed at 100 %"
        [ "$BACKEND" = fake ] && why="$why (the fake trainer's slowdown is synthetic: it proves the percentage reached the client's env)"
        rec grant_pct pass --reason "$why" "${figs[@]}"
    else
        rec grant_pct fail --reason "colocd run did not register the trainer, or the granted percentage did not reach the client or slow it below 0.9 of 100 %" "${figs[@]}"
    fi
else
    rec grant_pct fail --reason "the trainer under colocd run was not running within $W_TIMEOUT s" \
        events="$(js "$WORK/logs/train-a.err" '[(e["event"], e.get("message", "")[:200]) for e in ev]')"
    exit 1
fi

# ---------------------------------------------------------------- status_processes
A1_IN=$(js "$RES/status-grant.json" "$A1 in d['leases'][0].get('pids', [])")
figs=(trainer_pid="$A1" lease_pids="$(js "$RES/status-grant.json" 'd["leases"][0].get("pids")')" in_status="$A1_IN")
if [ "$BACKEND" = gpu ]; then
    apps=$(nvidia-smi -i 0 --query-compute-apps=pid,process_name --format=csv,noheader | paste -sd';' -)
    figs+=(smi_compute_apps="\"$apps\"")
fi
if [ "$A1_IN" = true ]; then
    rec status_processes pass --reason "the trainer's process is in the lease's pids in status (register accepted it as on the GPU$([ "$BACKEND" = fake ] && echo ': not checked on a simulated GPU'))" "${figs[@]}"
else
    rec status_processes fail --reason "the registered trainer is not in status" "${figs[@]}"
fi

# ---------------------------------------------------------------- throttle_reload
t0=$(now)
write_config "$SLO_THROTTLE"
reload=false
U status-wait --timeout 15 --cond "abs(s['services'][0]['slo_p99_ms'] - $SLO_THROTTLE) < 1e-6 and 'config_rejected' not in s" >/dev/null && reload=true
if U events-wait "$WORK/logs/train-a.err" --timeout $((DEADLINE + 30)) --cond 'any(e["event"] == "restarted" for e in ev)' &&
    U json-wait "$WORK/train-a.json" --timeout "$W_TIMEOUT" --cond "d['pid'] != $A1 and d['state'] == 'running' and d['units'] >= 3"; then
    T_PCT=$(js "$WORK/logs/train-a.err" '[e for e in ev if e["event"] == "throttled"][0]["pct"]')
    A2=$(js "$WORK/train-a.json" 'd["pid"]')
    registered train-a
    R=$(measure_rate "$WORK/train-a.json")
    ENV_PCT=$(js "$WORK/train-a.json" 'd["pct"]')
    figs=(slo_p99_ms="$SLO_THROTTLE" reloaded="$reload" from_pct="$GRANT_PCT" throttled_pct="$T_PCT" client_env_pct="\"$ENV_PCT\""
        restarts="$(js "$WORK/train-a.json" 'd["restarts"]')" old_pid="$A1" new_pid="$A2" old_pid_gone="$(alive "$A1" && echo false || echo true)"
        restart_s="$(js "$WORK/logs/train-a.err" '[e for e in ev if e["event"] == "restarted"][0].get("seconds")')"
        iters_per_s="$R" ratio="$(ratio_to_100 "$R")"
        registered_by="\"$REG_BY\"" seconds="$(since "$t0")")
    if [ "$reload" = true ] && [ "$REG_BY" = run ] && [ "$ENV_PCT" = "$T_PCT" ] && [ "$T_PCT" -lt "$GRANT_PCT" ] && ! alive "$A1"; then
        rec throttle_reload pass --reason "the reloaded SLO throttled $GRANT_PCT→$T_PCT %; colocd run restarted the trainer at $T_PCT %" "${figs[@]}"
    else
        rec throttle_reload fail --reason "no reload, no lower percentage, or the old trainer still runs" "${figs[@]}"
    fi
else
    rec throttle_reload fail --reason "no restart at a new percentage within the deadline" reloaded="$reload" \
        events="$(js "$WORK/logs/train-a.err" '[(e["event"], e.get("pct")) for e in ev]')"
fi

# ---------------------------------------------------------------- revoke_evict
# Two trainers: A's launcher stops it on the revoke; B's launcher is paused
# (SIGSTOP, a wedged launcher), so colocd evicts B's worker at the deadline
# through terminate_client.
write_config "$SLO_GRANT"
U status-wait --timeout 15 --cond "abs(s['services'][0]['slo_p99_ms'] - $SLO_GRANT) < 1e-6" >/dev/null ||
    log "the SLO of $SLO_GRANT ms is not in status 15 s after the config was replaced"
start_run train-b train-b --max-pct 20
RUN_B=$RUN_PID
if U json-wait "$WORK/train-b.json" --timeout "$W_TIMEOUT" --cond 'd["state"] == "running" and d["units"] >= 3'; then
    BW=$(js "$WORK/train-b.json" 'd["pid"]')
    registered train-b
    B_REG=$REG_BY
    AW=$(js "$WORK/train-a.json" 'd["pid"]')
    kill -STOP "$RUN_B"
    STOPPED+=("$RUN_B")
    inf_units0=$(js "$WORK/infer.json" 'd["units"]')
    t0=$(now)
    write_config "$SLO_REVOKE"
    exit_status "$RUN_A" $((DEADLINE + 20))
    A_RC=$EXIT_RC
    A_S=$(since "$t0")
    evicted=false
    for _ in $(seq 1 $(((DEADLINE + 30) * 5))); do
        grep -q "terminated an mps client.* pid=$BW server=" "$WORK/logs/serve.log" && { evicted=true; break; }
        sleep 0.2
    done
    B_S=$(since "$t0")
    BW_DONE=false
    U json-wait "$WORK/train-b.json" --timeout 20 --cond 'd["state"] != "running"' && BW_DONE=true
    kill -CONT "$RUN_B"
    exit_status "$RUN_B" 30
    B_RC=$EXIT_RC
    sleep 1
    inf_units1=$(js "$WORK/infer.json" 'd["units"]')
    inf_state=$(js "$WORK/infer.json" 'd["state"]')
    figs=(slo_p99_ms="$SLO_REVOKE" a_run_exit="$A_RC" a_stopped_s="$A_S" a_worker_gone="$(alive "$AW" && echo false || echo true)"
        b_evicted_through_terminate_client="$evicted" b_evicted_s="$B_S" b_worker_state="$(js "$WORK/train-b.json" 'd["state"]')"
        b_worker_error="$(js "$WORK/train-b.json" 'd["errors"]')" b_run_exit="$B_RC"
        inference_state="$inf_state" inference_units_during="$((inf_units1 - inf_units0))"
        inference_errors="$(js "$WORK/infer.json" 'd["errors"]')" deadline_s="$DEADLINE" b_registered_by="\"$B_REG\"")
    if [ "$A_RC" = 75 ] && [ "$evicted" = true ] && [ "$BW_DONE" = true ] && [ "$inf_state" = running ] &&
        [ "$inf_units1" -gt "$inf_units0" ] && alive "$INF_PID"; then
        rec revoke_evict pass --reason "revoked: run A stopped its trainer (exit 75); B's trainer, its launcher paused, was evicted through terminate_client; the inference worker served throughout" "${figs[@]}"
    else
        rec revoke_evict fail --reason "a revoke did not stop A (75), evict B through terminate_client, or keep the inference worker serving" "${figs[@]}"
    fi
else
    rec revoke_evict fail --reason "the second trainer did not start under colocd run" \
        events="$(js "$WORK/logs/train-b.err" '[(e["event"], e.get("message")) for e in ev]')"
fi
U status-wait --timeout 20 --cond 'len(s["leases"]) == 0' >/dev/null || log "leases left after the revoke"

# ---------------------------------------------------------------- daemon_recovery
# The daemon is killed (SIGKILL, as a crash); colocd's probe finds it gone,
# starts a new one in the same pipe directory and applies its defaults.
write_config "$SLO_GRANT"
D1=$(daemon_pid)
inf_units0=$(js "$WORK/infer.json" 'd["units"]')
log_lines0=$(wc -l <"$WORK/logs/serve.log")
t0=$(now)
[ -n "$D1" ] && kill -KILL "$D1"
D2=
for _ in $(seq 1 225); do # 45 s
    D2=$(daemon_pid)
    [ -n "$D2" ] && [ "$D2" != "$D1" ] && alive "$D2" && break
    D2=
    sleep 0.2
done
NEW_S=$(since "$t0")
up=false
U status-wait --timeout 30 --cond 's["ready"] and s["health"].get("mps") == "ok"' && up=true
UP_S=$(since "$t0")
down_line=$(tail -n +"$((log_lines0 + 1))" "$WORK/logs/serve.log" | grep -m1 'mps health changed.*to=down' | sed 's/.*reason=//' || true)
sleep "$POST"
inf_units1=$(js "$WORK/infer.json" 'd["units"]')
servers=""
[ "$BACKEND" = gpu ] && servers=$(pgrep -f nvidia-cuda-mps-server | paste -sd, - || true)
figs=(old_daemon="\"$D1\"" new_daemon="\"$D2\"" new_daemon_after_s="$NEW_S" ready_after_s="$UP_S"
    down_reason="$("$PY" -c 'import json,sys; print(json.dumps(sys.argv[1][:200]))' "$down_line")"
    defaults_applied="$(grep -c 'set_default_active_thread_percentage' "$PIPE/fake-commands.log" 2>/dev/null || echo null)"
    inference_state="$(js "$WORK/infer.json" 'd["state"]')" inference_units_after="$((inf_units1 - inf_units0))"
    inference_in_new_ps="$([[ ",$(mps_clients)," == *",$INF_PID,"* ]] && echo true || echo false)"
    mps_servers="\"$servers\"")
if [ -n "$D2" ] && [ -n "$down_line" ] && [ "$up" = true ]; then
    rec daemon_recovery pass --reason "colocd found the killed daemon gone, started a new one ($D2) and was ready again" "${figs[@]}"
else
    rec daemon_recovery fail --reason "colocd did not find the daemon gone, restart it and get ready again" "${figs[@]}"
fi

# ---------------------------------------------------------------- fault
inf_units0=$(js "$WORK/infer.json" 'd["units"]')
inf_alive0=$(alive "$INF_PID" && echo true || echo false)
start_run train-c train-c --max-pct 20 -- --fault-on "$WORK/fault-now" --linger-s 30
RUN_C=$RUN_PID
C_REG=none
if U json-wait "$WORK/train-c.json" --timeout "$W_TIMEOUT" --cond 'd["state"] == "running" and d["units"] >= 3'; then
    registered train-c
    C_REG=$REG_BY
    touch "$WORK/fault-now"
fi
if [ -e "$WORK/fault-now" ] && U json-wait "$WORK/train-c.json" --timeout 60 --cond 'd.get("fault") and d["state"] != "running"'; then
    t0=$(now)
    fault_seen=false
    U status-wait --timeout 15 --cond 's["health"].get("mps") != "ok"' --save "$RES/status-fault.json" && fault_seen=true
    exit_status "$RUN_C" 30
    C_RC=$EXIT_RC
    if [ "$BACKEND" = fake ]; then
        # The fake server leaves FAULT once the faulting client exited, as MPS does.
        rm -f "$PIPE/fake-fault"
    fi
    recovered=false
    U status-wait --timeout 45 --cond 's["ready"] and s["health"].get("mps") == "ok"' && recovered=true
    REC_S=$(since "$t0")
    sleep "$POST"
    inf_units1=$(js "$WORK/infer.json" 'd["units"]')
    revoked=$(js "$WORK/logs/train-c.err" 'any(e["event"] in ("revoked", "expired") for e in ev)')
    CW=$(js "$WORK/train-c.json" 'd["pid"]')
    c_terminated=$(grep -q "terminated an mps client.* pid=$CW server=" "$WORK/logs/serve.log" && echo true || echo false)
    figs=(worker_error="$(js "$WORK/train-c.json" 'd["errors"]')" driver="$(js "$WORK/train-c.json" 'd["fault"].get("driver")')"
        mps_health_seen="$(js "$RES/status-fault.json" 'd["health"].get("mps")')" fault_seen="$fault_seen"
        lease_revoked="$revoked" terminate_client="$c_terminated" registered_by="\"$C_REG\"" run_exit="$C_RC" recovered="$recovered" recovered_after_s="$REC_S"
        run_events="$(js "$WORK/logs/train-c.err" '[e["event"] for e in ev]')")
    ok=true
    [ "$C_RC" = 255 ] && ok=false
    [ "$recovered" = true ] || ok=false
    if [ "$BACKEND" = fake ] && { [ "$fault_seen" != true ] || [ "$revoked" != true ]; }; then ok=false; fi
    if [ "$ok" = true ]; then
        rec fault pass --reason "the faulting trainer ended (run exit $C_RC); colocd $([ "$fault_seen" = true ] && echo "reported the daemon's fault, " || echo "saw no fault, ")$([ "$revoked" = true ] && echo "revoked the lease" || echo "kept no lease"), and was ready again" "${figs[@]}"
    else
        rec fault fail --reason "the faulting trainer's run did not end, or colocd did not react and recover" "${figs[@]}"
    fi
    inf_state=$(js "$WORK/infer.json" 'd["state"]')
    figs=(inference_state="$inf_state" inference_errors="$(js "$WORK/infer.json" 'd["errors"]')"
        inference_units_after="$((inf_units1 - inf_units0))" inference_alive_before="$inf_alive0")
    if [ "$BACKEND" = fake ]; then
        rec fault_containment skip --reason "not measurable on fakes: a fake client's fault reaches no other client" "${figs[@]}"
    elif [ "$inf_state" = running ] && [ "$inf_units1" -gt "$inf_units0" ] && alive "$INF_PID"; then
        rec fault_containment pass --reason "the inference worker kept serving through the trainer's fault" "${figs[@]}"
    else
        rec fault_containment fail --reason "the trainer's fault reached the inference worker" "${figs[@]}"
    fi
else
    rec fault fail --reason "the faulting trainer did not start and fault" state="$(js "$WORK/train-c.json" 'd')" \
        events="$(js "$WORK/logs/train-c.err" '[(e["event"], e.get("message")) for e in ev]')"
    rec fault_containment fail --reason "no fault to contain" --gpu-only
fi

# ---------------------------------------------------------------- other_uid_register
OTHER_UID=$(id -u nobody 2>/dev/null || true)
if [ "$(id -u)" -ne 0 ]; then
    rec other_uid_register skip --reason "not root: this run cannot start a process of another user"
elif [ -z "$OTHER_UID" ] || ! command -v setpriv >/dev/null; then
    rec other_uid_register skip --reason "no user nobody, or no setpriv, to run a process of another user"
else
    mkdir -p "$WORK/uid"
    cp "$HERE"/*.py "$WORK/uid/"
    chmod -R a+rX "$WORK/uid"
    chmod 777 "$WORK/uid"
    ADMIT_RC=0
    ADMIT=$("$COLOCD" admit --job uid-job --profile "$TRAIN_PROFILE" --min-pct 10 --max-pct 20 --memory-mib "$MEM_MIB" 2>"$WORK/logs/uid-admit.err") || ADMIT_RC=$?
    L_ID= L_TOK=
    # The export lines admit prints (checked and single-quoted by admit), read in a subshell.
    [ "$ADMIT_RC" -eq 0 ] && { read -r L_ID L_TOK < <(eval "$ADMIT" && echo "$COLOCD_LEASE_ID $COLOCD_LEASE_TOKEN") || true; }
    b=torch
    [ "$BACKEND" = fake ] && b=fake
    setpriv --reuid="$OTHER_UID" --regid="$OTHER_UID" --clear-groups env HOME=/tmp COLOCD_LEASE_ID="$L_ID" \
        CUDA_MPS_PIPE_DIRECTORY="$PIPE" CUDA_MPS_LOG_DIRECTORY="$LOGD" CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=20 \
        "$PY_CMD" "$WORK/uid/e2e_worker.py" --role training --backend "$b" --workload "$TRAIN" --status "$WORK/uid/status.json" \
        >"$WORK/logs/uid.out" 2>"$WORK/logs/uid.err" &
    UID_PID=$!
    track "$UID_PID"
    for _ in $(seq 1 100); do # 20 s
        [ -s "$WORK/uid/status.json" ] && break
        alive "$UID_PID" || break
        sleep 0.2
    done
    UID_DONE=false
    if [ -z "$L_ID" ]; then
        rec other_uid_register fail --reason "admit refused the lease to register against (exit $ADMIT_RC)" \
            admit="$("$PY" -c 'import json,sys; print(json.dumps(sys.argv[1][-300:]))' "$ADMIT $(cat "$WORK/logs/uid-admit.err")")"
        UID_DONE=true
    elif ! alive "$UID_PID"; then
        rec other_uid_register skip --reason "the worker of uid $OTHER_UID did not start: $(tail -1 "$WORK/logs/uid.err" | cut -c1-200)"
        UID_DONE=true
    elif [ "$BACKEND" = fake ]; then
        # The fake's state is root's files: connect the client for it, as
        # the CUDA runtime of that user would.
        ctl "fake_client_connect $UID_PID $OTHER_UID e2e_worker.py" || true
    else
        sleep "$SETTLE" # its CUDA init: a client of another user than the server's waits there
    fi
    REG_RC=0 REG_MSG=
    alive "$UID_PID" && { REG_MSG=$("$COLOCD" register --lease "$L_ID" --token "$L_TOK" "$UID_PID" 2>&1) || REG_RC=$?; }
    # The user the MPS server serves: its process's real UID, as colocd reads it.
    server_uids=""
    for sp in $(ctl get_server_list 2>/dev/null || true); do
        u=$(awk '/^Uid:/ {print $2}' "/proc/$sp/status" 2>/dev/null || true)
        server_uids+="$sp:${u:-none},"
    done
    figs=(uid="$OTHER_UID" pid="$UID_PID" register_exit="$REG_RC" register_message="$("$PY" -c 'import json,sys; print(json.dumps(sys.argv[1][:300]))' "$REG_MSG")"
        worker_state="$(js "$WORK/uid/status.json" 'd["state"]')" mps_clients="\"$(mps_clients)\""
        mps_servers_uid="\"${server_uids%,}\"" status_mps="$("$COLOCD" status --json --timeout 5s 2>/dev/null | "$PY" -c 'import json,sys; print(json.dumps(json.load(sys.stdin).get("mps")))' || echo null)")
    if [ "$UID_DONE" = true ]; then
        : # recorded above
    elif [ -z "$REG_MSG" ]; then
        rec other_uid_register fail --reason "the worker of uid $OTHER_UID ended before its register" "${figs[@]}"
    elif [ "$REG_RC" -ne 0 ] && echo "$REG_MSG" | grep -qi -E "user|uid"; then
        rec other_uid_register pass --reason "register refused a process of uid $OTHER_UID, not the MPS server's user" "${figs[@]}"
    elif [ "$BACKEND" = fake ]; then
        rec other_uid_register skip --reason "not measurable on fakes: the fake daemon's server PIDs are no processes, so no server user is known to check (register exit $REG_RC)" "${figs[@]}"
    elif [ "$REG_RC" -ne 0 ]; then
        rec other_uid_register fail --reason "register refused it, but not for its user" "${figs[@]}"
    else
        rec other_uid_register fail --reason "register accepted a process of uid $OTHER_UID, not the MPS server's user" "${figs[@]}"
    fi
    [ -n "$L_ID" ] && { "$COLOCD" release --lease "$L_ID" --token "$L_TOK" || true; }
    kill -TERM "$UID_PID" 2>/dev/null || true
    wait_gone "$UID_PID" 10 || kill -KILL "$UID_PID" 2>/dev/null || true
fi

# ---------------------------------------------------------------- shutdown
kill -TERM "$INF_PID" 2>/dev/null || true
exit_status "$INF_PID" 20
INF_RC=$EXIT_RC
kill -TERM "$SERVE_PID" 2>/dev/null || true
exit_status "$SERVE_PID" 30
SERVE_RC=$EXIT_RC
D=$(daemon_pid)
left_by_colocd=false
[ -n "$D" ] && alive "$D" && left_by_colocd=true
QUIT_RC=0
ctl quit || QUIT_RC=$?
gone=true
[ -n "$D" ] && { wait_gone "$D" 15 || gone=false; }
[ -e "$PIPE/nvidia-cuda-mps-control.pid" ] && gone=false
left=()
for p in "${PIDS[@]}"; do alive "$p" && left+=("$p"); done
servers=$(our_servers)
for _ in $(seq 1 25); do [ -z "$servers" ] && break; sleep 0.4; servers=$(our_servers); done
figs=(inference_exit="$INF_RC" serve_exit="$SERVE_RC" daemon_left_by_colocd="$left_by_colocd" quit_exit="$QUIT_RC"
    daemon_gone="$gone" processes_left="\"${left[*]:-}\"" mps_servers_left="\"$servers\"")
if [ "$SERVE_RC" = 0 ] && [ "$left_by_colocd" = true ] && [ "$QUIT_RC" = 0 ] && [ "$gone" = true ] && [ ${#left[@]} -eq 0 ] && [ -z "$servers" ]; then
    rec shutdown pass --reason "colocd stopped (exit 0) leaving the daemon (quit_on_close false); quit through its pipe directory; nothing left running" "${figs[@]}"
else
    rec shutdown fail --reason "something was left running or did not stop cleanly" "${figs[@]}"
fi
log "all steps done"
