#!/usr/bin/env bash
# The one prepared script for the GPU machine (docs/accuracy.md):
#
#   OUT=/path/to/results bash tools/gpu-harness/run.sh [measure.py options]
#
# checks nvidia-smi, the MPS control binary and torch, runs measure.py under a
# hard timeout, quits the MPS daemon if measure.py could not, and packs the
# results into $OUT as at most 8 files (what a remote runner returns): run.log,
# summary.txt, measurements.json, <name>-results.tar.gz (everything but the
# traces) and <name>-traces.tar (the gzipped Kineto traces; split into 15 MiB
# parts if larger). The GPU's settings are never changed.
#
# Environment:
#   OUT        where the results go (a remote runner sets it; default ./gpu-harness-out)
#   BUDGET_S   measure.py's global deadline in seconds (default 300)
#   HARD_S     the hard timeout around measure.py (default BUDGET_S + 60)
#   PYTHON     the interpreter with torch (default python3)
#   COLOCD     the colocd binary (default tools/gpu-harness/bin/colocd)
#   NAME       the results' name (default h200)
#   BACKEND    torch (default) or fake: a dry run with no GPU (synthetic output)
#
# The opt-in phases (--ts-traces, --spin-sweep; README.md) need BUDGET_S=380
# to leave the default windows their length: HARD_S 440, under 10 minutes.
set -uo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
OUT=${OUT:-$PWD/gpu-harness-out}
BUDGET_S=${BUDGET_S:-300}
HARD_S=${HARD_S:-$((${BUDGET_S%.*} + 60))}
PY=${PYTHON:-python3}
COLOCD=${COLOCD:-$HERE/bin/colocd}
NAME=${NAME:-h200}
BACKEND=${BACKEND:-torch}
MPS_CONTROL=${MPS_CONTROL:-nvidia-cuda-mps-control}
if [ "$BACKEND" = fake ]; then
    MPS_CONTROL=$HERE/fake_mps_control.py
fi

mkdir -p "$OUT"
WORK=$(mktemp -d /tmp/colocd-gpu.XXXXXX)
RES=$WORK/$NAME
PIPE=$(mktemp -d /tmp/colocd-mps.XXXXXX)
mkdir -p "$RES"
export PYTHONUNBUFFERED=1

checks() {
    echo "== checks ($(date -u +%Y-%m-%dT%H:%M:%SZ), budget ${BUDGET_S} s, hard timeout ${HARD_S} s)"
    uname -a
    if [ "$BACKEND" = fake ]; then
        echo "BACKEND=fake: no GPU checks; the output is SYNTHETIC"
        return 0
    fi
    if ! command -v nvidia-smi >/dev/null; then
        echo "FAIL: nvidia-smi not found"
        return 2
    fi
    nvidia-smi 2>&1 | tee "$RES/nvidia-smi.txt"
    nvidia-smi --query-gpu=name,uuid,driver_version,compute_mode,mig.mode.current,memory.total,memory.used \
        --format=csv 2>&1
    nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv 2>&1
    if ! command -v "$MPS_CONTROL" >/dev/null; then
        echo "note: $MPS_CONTROL not on PATH: MPS will be recorded as not started"
    fi
    if ! "$PY" -c 'import sys, torch
print("torch", torch.__version__, "CUDA", torch.version.cuda, "GPU available", torch.cuda.is_available())
if torch.cuda.is_available():
    p = torch.cuda.get_device_properties(0)
    print("device", p.name, p.multi_processor_count, "SMs", p.total_memory >> 20, "MiB")
sys.exit(0 if torch.cuda.is_available() else 3)'; then
        echo "FAIL: $PY has no torch with a usable GPU"
        return 3
    fi
    if [ -x "$COLOCD" ]; then
        "$COLOCD" --version || echo "note: $COLOCD does not run here: profiles will be imported later (measure.py --finalize-only)"
    else
        echo "note: no colocd at $COLOCD: profiles will be imported later (measure.py --finalize-only)"
    fi
}

measure() {
    local extra=()
    if [ "$BACKEND" = fake ]; then
        extra=(--backend fake)
    fi
    echo "== measure.py (deadline ${BUDGET_S} s)"
    timeout -k 20 "$HARD_S" "$PY" "$HERE/measure.py" --out "$RES" --colocd "$COLOCD" --budget-s "$BUDGET_S" \
        --mps-control "$MPS_CONTROL" --mps-pipe-dir "$PIPE" "${extra[@]}" "$@"
    local rc=$?
    echo "measure.py exit status $rc"
    # Belt and braces: if measure.py was killed before its finally block ran,
    # quit the daemon it started (same pipe directory, so never another one).
    if [ -e "$PIPE/nvidia-cuda-mps-control.pid" ]; then
        echo "the MPS daemon of $PIPE is still up: quitting it"
        echo quit | CUDA_MPS_PIPE_DIRECTORY="$PIPE" CUDA_MPS_LOG_DIRECTORY="$RES/mps-log" \
            timeout 15 "$MPS_CONTROL" || echo "quit failed (status $?)"
    fi
    return $rc
}

pack() {
    echo "== pack into $OUT"
    for f in measurements.json summary.txt; do
        [ -e "$RES/$f" ] && cp "$RES/$f" "$OUT/"
    done
    tar -C "$WORK" -czf "$OUT/$NAME-results.tar.gz" --exclude="$NAME/traces" "$NAME"
    if [ -d "$RES/traces" ]; then
        tar -C "$WORK" -cf "$WORK/traces.tar" "$NAME/traces"
        local size limit=$((15 * 1024 * 1024))
        size=$(stat -c %s "$WORK/traces.tar")
        if [ "$size" -le "$limit" ]; then
            cp "$WORK/traces.tar" "$OUT/$NAME-traces.tar"
        elif [ "$size" -le $((4 * limit)) ]; then
            split -b "$limit" -d -a 1 "$WORK/traces.tar" "$OUT/$NAME-traces.tar.part"
            echo "traces split: cat $NAME-traces.tar.part* > $NAME-traces.tar"
        else
            echo "traces are $size bytes, over the 4 x 15 MiB a remote runner returns: not copied (profiles are in the results)"
        fi
    fi
    ls -la "$OUT"
}

main() {
    local rc=0
    checks || rc=$?
    if [ "$rc" -eq 0 ]; then
        measure "$@" || rc=$?
    fi
    pack
    echo "run.sh exit status $rc"
    return $rc
}

main "$@" 2>&1 | tee "$OUT/run.log"
status=${PIPESTATUS[0]}
rm -rf "$WORK"
[ -e "$PIPE/nvidia-cuda-mps-control.pid" ] || rm -rf "$PIPE"
exit "$status"
