#!/usr/bin/env bash
# The Slurm recipe of docs/launchers.md, run as written on a one-node Slurm
# started here (munged, slurmctld, slurmd from a generated slurm.conf in a
# temporary directory, no systemd) against a `colocd serve` on the simulated
# GPU. Four cases, each asserted with figures: a grant, a revoke with requeue,
# scancel, the time limit. `make slurm-test` runs it; it is not part of make test.
#
#   COLOCD=bin/colocd  KEEP=1 (keep the temporary directory)  CASES="grant revoke scancel timelimit"
#   RECIPE=FILE (a batch script to run instead of the page's)
set -euo pipefail

REPO=$(cd "$(dirname "$0")/../.." && pwd)
COLOCD=$(realpath "${COLOCD:-$REPO/bin/colocd}")
CASES=${CASES:-grant revoke scancel timelimit}
KILLWAIT=${KILLWAIT:-100}   # what the recipe's --grace 90s needs (docs/launchers.md#slurm)
CRED_EXPIRE=${CRED_EXPIRE:-30}  # a requeued job starts again no sooner than this (Slurm's default: 120 s)

die() { echo "slurm-test: FAIL: $*" >&2; exit 1; }
say() { echo "slurm-test: $*" >&2; }

for tool in munged mungekey slurmctld slurmd sbatch scontrol scancel squeue sinfo python3; do
	command -v "$tool" >/dev/null || die "$tool not found (make slurm-test installs slurm-wlm and munge)"
done
[ -x "$COLOCD" ] || die "no colocd binary at $COLOCD (make build)"
[ "$(id -u)" = 0 ] || die "slurmd must run as root here (it starts jobs as their user); run as root"

T=$(mktemp -d /tmp/colocd-slurm.XXXXXX)
chmod 0755 "$T"
PIDS=()
declare -A RESULT FIGURES
FAILED=0
cleanup() {
	local rc=$?
	set +e
	if [ -n "${SLURM_CONF:-}" ] && [ -f "$SLURM_CONF" ] && scontrol ping >/dev/null 2>&1; then
		# this cluster's jobs end before its daemons (slurmstepd outlives slurmd)
		scancel --quiet -u root >/dev/null 2>&1
		for _ in $(seq 20); do [ -z "$(squeue -h 2>/dev/null)" ] && break; sleep 0.5; done
		scancel --quiet --full --signal=KILL -u root >/dev/null 2>&1
		for _ in $(seq 20); do [ -z "$(squeue -h 2>/dev/null)" ] && break; sleep 0.5; done
	fi
	for ((i = ${#PIDS[@]} - 1; i >= 0; i--)); do kill -TERM "${PIDS[i]}" 2>/dev/null; done
	for _ in $(seq 50); do
		alive=0
		for p in "${PIDS[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
		[ "$alive" = 0 ] && break
		sleep 0.2
	done
	for p in "${PIDS[@]}"; do kill -KILL "$p" 2>/dev/null; done
	if [ "$rc" != 0 ] && [ -z "${SUMMARY_DONE:-}" ]; then
		for c in $CASES; do [ -n "${RESULT[$c]:-}" ] && echo "  $c ${RESULT[$c]} ${FIGURES[$c]}" >&2; done
		for f in slurmctld.log slurmd.log colocd.err; do
			[ -f "$T/$f" ] && { echo "--- last lines of $T/$f"; tail -25 "$T/$f"; } >&2
		done
	fi
	if [ "${KEEP:-}" = 1 ] || [ "$rc" != 0 ]; then say "kept $T"; else rm -rf "$T"; fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# wait_for SECONDS WHAT CMD...: CMD every half second until it succeeds, or fail.
wait_for() {
	local secs=$1 what=$2 end
	shift 2
	end=$((SECONDS + secs))
	until "$@" >/dev/null 2>&1; do
		[ "$SECONDS" -lt "$end" ] || die "timed out after ${secs}s waiting for $what"
		sleep 0.5
	done
}
# since T0 [T1]: the seconds from T0 to T1 (default: now), both $EPOCHREALTIME values.
since() { python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" "$1" "${2:-$EPOCHREALTIME}"; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# --- the recipe, as the page has it: the first sh block under "## Slurm"
awk '/^## Slurm$/ {in_s=1; next} /^## / {in_s=0} in_s && /^```sh$/ && !done {b=1; next} b && /^```$/ {b=0; done=1} b' \
	"$REPO/docs/launchers.md" >"$T/recipe.sh"
[ -z "${RECIPE:-}" ] || cp "$RECIPE" "$T/recipe.sh"
head -1 "$T/recipe.sh" | grep -q '^#!/bin/bash' || die "no #!/bin/bash script under '## Slurm' in docs/launchers.md"
grep -q 'srun colocd run' "$T/recipe.sh" || die "the Slurm recipe has no 'srun colocd run'"
say "recipe: $(wc -l <"$T/recipe.sh") lines from ${RECIPE:-docs/launchers.md}"

# --- colocd serve on the simulated GPU, its SLO in a file it reloads
NATS_PORT=$(free_port)
HTTP_PORT=$(free_port)
mkdir -p "$T/colocd"
slo_config() { # slo_config P99_MS: the example config with that SLO, written as an editor saves
	sed -e "s#\.\./testdata/#$REPO/testdata/#" -e "s#^\(      p99_ms:\) 100\$#\1 $1#" \
		-e "s#^\(    raise_after:\) 5m#\1 5s#" "$REPO/configs/colocd.yaml" >"$T/colocd/colocd.yaml.new"
	grep -q "^      p99_ms: $1\$" "$T/colocd/colocd.yaml.new" || die "configs/colocd.yaml has no 'p99_ms: 100' to change"
	mv "$T/colocd/colocd.yaml.new" "$T/colocd/colocd.yaml"
}
slo_config 100
"$COLOCD" serve --config "$T/colocd/colocd.yaml" --set sidecar.data_dir="$T/colocd/data" \
	--set nats.listen=127.0.0.1:"$NATS_PORT" --set telemetry.http=127.0.0.1:"$HTTP_PORT" \
	--set mps.pipe_dir="$T/colocd/mps" --set mps.log_dir="$T/colocd/mpslog" \
	>"$T/colocd.out" 2>"$T/colocd.err" &
PIDS+=($!)
wait_for 30 "colocd serve's launcher line" grep -q "COLOCD_SIDECAR=" "$T/colocd.out"
SIDECAR=$(sed -n "s/.*COLOCD_SIDECAR='\([^']*\)'.*/\1/p" "$T/colocd.out")
wait_for 30 "colocd /readyz" "$COLOCD" probe --url "http://127.0.0.1:$HTTP_PORT/readyz" --timeout 1s
export COLOCD_SERVER=nats://127.0.0.1:$NATS_PORT
"$COLOCD" launcher add slurm --config "$T/colocd/colocd.yaml" --dir "$T/colocd/data/launchers" \
	--out "$T/slurm.nk" >/dev/null
export COLOCD_NKEY=$T/slurm.nk COLOCD_SIDECAR=$SIDECAR
wait_for 10 "the slurm identity to be let in" "$COLOCD" status --sidecar "$SIDECAR" --timeout 2s
say "colocd serve: sidecar $SIDECAR, nats $COLOCD_SERVER, launcher identity slurm"

# --- munge and a one-node Slurm
mkdir -p "$T/munge" "$T/state" "$T/spool"
chmod 0700 "$T/munge"
mungekey --create --keyfile "$T/munge/munge.key" >/dev/null 2>&1 ||
	dd if=/dev/urandom of="$T/munge/munge.key" bs=1024 count=1 2>/dev/null
chmod 0400 "$T/munge/munge.key"
munged --force --foreground --key-file="$T/munge/munge.key" --socket="$T/munge/munge.socket" \
	--pid-file="$T/munge/munged.pid" --log-file="$T/munge/munged.log" --seed-file="$T/munge/munged.seed" \
	>"$T/munged.out" 2>&1 &
PIDS+=($!)
wait_for 10 "munged's socket" test -S "$T/munge/munge.socket"

HOST=$(hostname)
export SLURM_CONF=$T/slurm.conf
cat >"$SLURM_CONF" <<EOF
ClusterName=colocd-test
SlurmctldHost=$HOST(127.0.0.1)
SlurmctldPort=$(free_port)
SlurmdPort=$(free_port)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$T/munge/munge.socket,cred_expire=$CRED_EXPIRE
CredType=cred/munge
StateSaveLocation=$T/state
SlurmdSpoolDir=$T/spool
SlurmctldPidFile=$T/slurmctld.pid
SlurmdPidFile=$T/slurmd.pid
SlurmctldLogFile=$T/slurmctld.log
SlurmdLogFile=$T/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/backfill
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SwitchType=switch/none
JobRequeue=1
KillWait=$KILLWAIT
MinJobAge=3600
ReturnToService=2
SlurmdParameters=config_overrides
NodeName=$HOST NodeAddr=127.0.0.1 CPUs=2 State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
slurmctld -D -i -f "$SLURM_CONF" >"$T/slurmctld.out" 2>&1 &
PIDS+=($!)
wait_for 30 "slurmctld to answer" scontrol ping
slurmd -D -f "$SLURM_CONF" -N "$HOST" >"$T/slurmd.out" 2>&1 &
PIDS+=($!)
node_idle() { sinfo -h -n "$HOST" -o %t 2>/dev/null | grep -qx idle; }
if ! (wait_for 60 "node $HOST idle" node_idle); then
	die "Slurm did not start here: node $HOST is '$(sinfo -h -n "$HOST" -o '%t %E' 2>&1)'; slurmd: $(tail -3 "$T/slurmd.out" "$T/slurmd.log" 2>/dev/null | tr '\n' ' ')"
fi
say "slurm $(sinfo --version | cut -d' ' -f2): node $HOST idle, KillWait=$KILLWAIT"

# --- helpers for the cases
PATH_JOB="$REPO/bin:$PATH"
[ "$(dirname "$COLOCD")" = "$REPO/bin" ] || PATH_JOB="$(dirname "$COLOCD"):$PATH_JOB"
# submit CASE STEPS [sbatch flags]: a job dir with the trainer and its profile, the recipe submitted there
submit() {
	local name=$1 steps=$2
	shift 2
	local d=$T/jobs/$name
	mkdir -p "$d"
	cp "$REPO/tools/slurm/train.py" "$d/train.py"
	cp "$REPO/testdata/profiles/v100-train-step.json" "$d/train.json"
	(cd "$d" && PATH=$PATH_JOB TRAIN_STEPS=$steps sbatch --parsable "$@" "$T/recipe.sh")
}
ENDED="COMPLETED FAILED CANCELLED TIMEOUT NODE_FAIL OUT_OF_MEMORY"
jobfield() { scontrol -o show job "$1" 2>/dev/null | tr ' ' '\n' | sed -n "s/^$2=//p" | head -1; }
job_state_is() { [[ " $2 " == *" $(jobfield "$1" JobState) "* ]]; }
out_of() { cat "$T/jobs/$1/slurm-$2.out" 2>/dev/null || true; }
out_has() { out_of "$1" "$2" | grep -q -- "$3"; }
count_in() { out_of "$1" "$2" | grep -c -- "$3" || true; }
# live_leases JOB: the sidecar's leases of that colocd job not released
live_leases() {
	"$COLOCD" status --sidecar "$SIDECAR" --json |
		python3 -c 'import json,sys; j=sys.argv[1]; print(sum(1 for l in json.load(sys.stdin).get("leases") or [] if l.get("job_id")==j and l.get("state")!="released"))' "$1"
}
# trail CASE JOB: the trainer's runs, "run R: S→ckpt N" or "run R: S→done N", one per run
trail() {
	out_of "$1" "$2" | awk '/^train: /{
		for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
		if ($2 == "start") r = r (r == "" ? "" : "; ") "run " v["restart_count"] ": " v["step"]
		else if ($2 == "sigterm") r = r "→ckpt " v["step"]
		else if ($2 == "done") r = r "→done " v["step"] }
		END { print r }'
}
no_live_leases() { [ "$(live_leases "$1")" = 0 ]; }

pass() { RESULT[$1]=pass; FIGURES[$1]=$2; say "$1: pass: $2"; }
fail() { RESULT[$1]=FAIL; FIGURES[$1]=$2; FAILED=1; say "$1: FAIL: $2"; }
# check CASE COND MESSAGE: record a failed assertion
check() { if ! eval "$2"; then ERRS+=("$3"); fi; }

# The helpers below read the calling case's c (its name), id (its job),
# figs and ERRS, as bash's locals are seen by the functions they call.

# trainer_started waits for the job's trainer to start, and a little more.
trainer_started() {
	wait_for 120 "job $id's trainer to start" out_has $c "$id" '^train: start'
	sleep 2
}

# out_first SCRIPT is the first line that sed -n SCRIPT prints of the job's output.
out_first() {
	out_of $c "$id" | sed -n "$1" | head -1
}

# first_checkpoint is the step of the trainer's first SIGTERM checkpoint.
first_checkpoint() {
	out_first 's/^train: sigterm checkpoint step=\([0-9]*\) .*/\1/p'
}

# job_ended SECS waits up to SECS for the job to end (the time it did in the
# case's ended_at) and for its lease to be released, reads its end into the
# case's state, exit and restarts, and the count of colocd run's
# lease-released lines into its released, and starts its ERRS.
job_ended() {
	wait_for "$1" "job $id to end" job_state_is "$id" "$ENDED"
	ended_at=$EPOCHREALTIME
	wait_for 15 "job $id's lease released" no_live_leases "resnet-$id"
	state=$(jobfield "$id" JobState)
	exit=$(jobfield "$id" ExitCode)
	restarts=$(jobfield "$id" Restarts)
	released=$(count_in $c "$id" 'colocd run: lease .* released')
	ERRS=()
}

# check_completed, check_reached STEPS and check_released are the checks
# that the job ended COMPLETED with exit 0:0, that its trainer reached STEPS,
# and that colocd run said it released a lease.
check_completed() {
	check $c '[ "$state" = COMPLETED ] && [ "$exit" = 0:0 ]' "state $state exit $exit, want COMPLETED 0:0"
}
check_reached() {
	check $c "out_has \$c \"\$id\" \"train: done step=$1\"" "the trainer did not reach step $1"
}
check_released() {
	check $c '[ "$released" -ge 1 ]' "no 'colocd run: lease .* released' line"
}

# verdict says the case passed with its figures, or failed with them and
# every check that did not hold.
verdict() {
	if [ ${#ERRS[@]} = 0 ]; then pass $c "$figs"; else fail $c "$figs; $(IFS=';'; echo "${ERRS[*]}")"; fi
}

case_grant() {
	local c=grant id
	id=$(submit $c 20)
	local state exit restarts released ended_at lease pct
	job_ended 120
	lease=$(out_first 's/^train: start .* lease=\([^ ]*\) .*/\1/p')
	pct=$(out_first 's/^train: start .* pct=\([^ ]*\) .*/\1/p')
	check $c '[ "$state" = COMPLETED ]' "state $state, want COMPLETED"
	check $c '[ "$exit" = 0:0 ]' "exit $exit, want 0:0"
	check $c '[ -n "$lease" ] && [ -n "$pct" ]' "no COLOCD_LEASE_ID or CUDA_MPS_ACTIVE_THREAD_PERCENTAGE in the trainer's env"
	check_reached 20
	check_released
	local figs="job $id $state exit $exit, lease $lease at ${pct}%, steps 20/20, released ($released line), live leases after: $(live_leases "resnet-$id")"
	verdict
}

case_revoke() {
	local c=revoke id
	id=$(submit $c 120)
	trainer_started
	local t0=$EPOCHREALTIME
	slo_config 1 # no room beside the service at any percentage: the re-plan revokes
	wait_for 90 "job $id to be revoked and requeued" eval '[ "$(jobfield "$id" Restarts)" -ge 1 ]'
	local revoked_after=$(since "$t0")
	wait_for 180 "the requeued run of $id to wait for a slot" eval 'out_of $c "$id" | grep -A100 "restart_count=0" | grep -q "colocd run: .*wait"'
	local waits_before=$(count_in $c "$id" 'colocd run: .*wait')
	t0=$EPOCHREALTIME
	slo_config 100 # room again
	wait_for 180 "the requeued run of $id to be admitted" eval 'out_has $c "$id" "^train: start .*restart_count=1"'
	local readmitted_after=$(since "$t0")
	local state exit restarts released ended_at ck resumed revokes leases
	job_ended 120
	ck=$(first_checkpoint)
	resumed=$(out_first 's/^train: start step=\([0-9]*\) .*restart_count=1 .*/\1/p')
	revokes=$(count_in $c "$id" 'colocd run: .*revoke')
	leases=$(out_of $c "$id" | sed -n 's/^train: start .* lease=\([^ ]*\) .*/\1/p' | sort -u | wc -l)
	check $c '[ "$revokes" -ge 1 ]' "no revoke line from colocd run"
	check $c '[ -n "$ck" ]' "the trainer wrote no checkpoint on the revoke's SIGTERM"
	check $c '[ "$restarts" = 1 ]' "Restarts=$restarts, want 1 (scontrol requeue on exit 75)"
	check $c '[ "$waits_before" -ge 1 ]' "the requeued run did not wait for a slot"
	check $c '[ -n "$resumed" ] && [ "$resumed" = "$ck" ]' "the requeued run started at step '$resumed', want the checkpoint's $ck"
	check $c '[ "$leases" = 2 ]' "$leases distinct leases, want 2 (one per run)"
	check_completed
	check_reached 120
	local figs="job $id: revoked (exit 75) and requeued ${revoked_after}s after the SLO went to 1 ms (Restarts=$restarts), checkpoint at step $ck; requeued run waited ($waits_before wait lines), admitted ${readmitted_after}s after the SLO came back, resumed at step $resumed, $leases leases; ended $state $exit; trainer: $(trail $c "$id")"
	verdict
}

case_scancel() {
	local c=scancel id
	id=$(submit $c 100000)
	trainer_started
	local t0=$EPOCHREALTIME
	scancel "$id"
	local state exit restarts released ended_at ck file
	job_ended $((KILLWAIT + 60))
	local ended_after=$(since "$t0" "$ended_at")
	ck=$(first_checkpoint)
	file=$(cat "$T/jobs/$c/ckpt/step" 2>/dev/null || echo none)
	check $c '[ "$state" = CANCELLED ]' "state $state, want CANCELLED"
	check $c '[ "$restarts" = 0 ]' "Restarts=$restarts, want 0 (scancel is not requeued)"
	check $c 'out_has $c "$id" "colocd run: .*SIGTERM\|colocd run: .*terminated\|colocd run: .*interrupted"' "colocd run said nothing of the SIGTERM"
	check $c '[ -n "$ck" ] && [ "$file" = "$ck" ]' "checkpoint: trainer said '$ck', ckpt/step holds '$file'"
	check_released
	local figs="job $id: $state ${ended_after}s after scancel (KillWait $KILLWAIT), trainer checkpoint at step $ck (ckpt/step=$file), released ($released line), Restarts=$restarts, live leases after: $(live_leases "resnet-$id")"
	verdict
}

case_timelimit() {
	# --time=3 with the recipe's USR1@120: Slurm signals at its first 30-s check with at most
	# 150 s left, 30 to 60 s into each run; 360 steps of 0.25 s (90 s) take two runs or three.
	local c=timelimit id
	id=$(submit $c 360 --time=3)
	wait_for 240 "job $id's time-limit signal" eval '[ "$(jobfield "$id" Restarts)" -ge 1 ] || job_state_is "$id" "$ENDED"'
	local state exit restarts released ended_at runs chain t_start t_term t_resume tl
	job_ended 600
	tl=$(jobfield "$id" TimeLimit)
	runs=$(count_in $c "$id" '^train: start')
	# each run starts where the one before checkpointed, every run but the last checkpoints
	chain=$(out_of $c "$id" | awk '/^train: /{
			for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
			if ($2 == "start") { n++; if (v["step"] != last || v["restart_count"] != n - 1) bad = 1; open = 1 }
			else if ($2 == "sigterm") { last = v["step"]; open = 0 }
			else if ($2 == "done") { last = "done"; open = 0 } }
		BEGIN { last = 0 } END { print (bad || open || last != "done") ? "broken" : "ok" }')
	t_start=$(out_first 's/^train: start .* t=\([0-9.]*\) restart_count=0 .*/\1/p')
	t_term=$(out_first 's/^train: sigterm checkpoint .* t=\([0-9.]*\) restart_count=0 .*/\1/p')
	t_resume=$(out_first 's/^train: start .* t=\([0-9.]*\) restart_count=1 .*/\1/p')
	check $c '[ -n "$t_term" ]' "the first run wrote no checkpoint at the time-limit signal"
	check $c '[ "$restarts" -ge 1 ]' "Restarts=$restarts: the job was not requeued at its time limit"
	check $c '[ "$runs" = $((restarts + 1)) ]' "$runs trainer starts for Restarts=$restarts"
	check $c '[ "$chain" = ok ]' "a run did not resume from the checkpoint before it"
	check $c '[ "$released" = "$runs" ]' "$released 'colocd run: lease … released' lines for $runs runs"
	check_completed
	check_reached 360
	local into again
	into=$([ -n "$t_term" ] && [ -n "$t_start" ] && python3 -c "print(round($t_term - $t_start))" || echo '?')
	again=$([ -n "$t_resume" ] && [ -n "$t_term" ] && python3 -c "print(round($t_resume - $t_term))" || echo '?')
	local figs="job $id (TimeLimit=$tl, USR1@120): first run signalled and checkpointed ${into}s after the trainer started, requeued, trainer again ${again}s later (cred_expire $CRED_EXPIRE); Restarts=$restarts, each run resumed from the last checkpoint ($chain), $released releases, ended $state $exit; trainer: $(trail $c "$id")"
	verdict
}

for c in $CASES; do
	say "case $c"
	declare -F "case_$c" >/dev/null || die "no case $c"
	"case_$c"
done

echo
echo "make slurm-test: Slurm $(sinfo --version | cut -d' ' -f2), one node, KillWait=$KILLWAIT; colocd $("$COLOCD" --version 2>/dev/null | head -1)"
for c in $CASES; do printf '  %-9s %-4s %s\n' "$c" "${RESULT[$c]:-FAIL}" "${FIGURES[$c]:-did not finish}"; done
SUMMARY_DONE=1
[ "$FAILED" = 0 ] || exit 1
