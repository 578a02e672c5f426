#!/usr/bin/env bash
# deepgrid under Slurm: starts a one-node Slurm cluster of its own (munged, slurmctld, slurmd,
# all in a temporary directory, on free ports), then
#  1. srun -n 2 --mpi=pmix deepgrid create/run/checksum: the same SHA-256 as a serial run;
#  2. examples/slurm/deepgrid.sbatch under sbatch, sent SIGINT (what its --signal=B:INT does
#     before a time limit) once the run has started: the script stops the ranks and requeues
#     the job, the requeued job resumes the run, and the grid ends bitwise as the serial one
#     (LAUNCH=mpirun in the environment: the same with mpirun in the job).
# Skips (exit 77) when Slurm, munge or the PMIx plugin is missing, when not root (slurmd must
# start jobs as their users), or when a daemon does not come up in time. Every daemon it
# started is stopped on exit. The example must at least parse (bash -n), checked first.
# Usage: slurm_test.sh DEEPGRID EXAMPLE_SBATCH
set -euo pipefail
dg=$(realpath "$1") example=$(realpath "$2")
fail() {
  echo "FAIL: $*" >&2
  exit 1
}
skip() {
  echo "SKIP: $*"
  exit 77
}
bash -n "$example" || fail "$example does not parse"

[ "$(id -u)" -eq 0 ] || skip "needs root (slurmd starts jobs as their users)"
for c in munged slurmctld slurmd srun sbatch squeue scontrol scancel sinfo; do
  command -v "$c" >/dev/null || skip "$c not installed (Debian: slurm-wlm munge)"
done

tmp=$(mktemp -d)
chmod 755 "$tmp"  # munged wants its socket's directory searchable by every user
pids=()
cleanup() {
  local rc=$?
  set +e
  if [ -n "${SLURM_CONF:-}" ] && [ -e "$tmp/slurmctld.ready" ]; then
    # Jobs first: their slurmstepd outlive slurmd.
    timeout 10 scancel --quiet --user=root 2>/dev/null
    for _ in $(seq 40); do
      [ -z "$(timeout 5 squeue -h -o %i 2>/dev/null)" ] && break
      sleep 0.5
    done
  fi
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do kill "${pids[i]}" 2>/dev/null; done
  for p in "${pids[@]}"; do
    for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.2; done
    kill -9 "$p" 2>/dev/null
  done
  if [ "$rc" -ne 0 ] && [ "$rc" -ne 77 ]; then
    for f in "$tmp"/*.log "$tmp"/job.out; do [ -e "$f" ] && { echo "== $f"; tail -n 30 "$f"; }; done
  fi
  rm -rf "$tmp"
  exit "$rc"
}
trap cleanup EXIT
trap 'echo "FAIL: line $LINENO: \"$BASH_COMMAND\" exited $?" >&2' ERR

# Waits up to $1 seconds for the command "${@:2}" to succeed.
wait_for() {
  local deadline=$((SECONDS + $1))
  shift
  until "$@"; do
    [ "$SECONDS" -lt "$deadline" ] || return 1
    sleep 0.2
  done
}
port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# munge: its own key and socket, so that a system munged (if any) is left alone.
dd if=/dev/urandom of="$tmp/munge.key" bs=1024 count=1 status=none
chmod 400 "$tmp/munge.key"
munged --force --foreground --key-file="$tmp/munge.key" --socket="$tmp/munge.sock" \
  --log-file="$tmp/munged.log" --pid-file="$tmp/munged.pid" --seed-file="$tmp/munged.seed" \
  >"$tmp/munged.out" 2>&1 &
pids+=($!)
wait_for 10 test -S "$tmp/munge.sock" || skip "munged did not start: $(tail -n 3 "$tmp/munged.log")"

port=$((20000 + RANDOM % 20000))
while ! port_free "$port" || ! port_free $((port + 1)); do port=$((20000 + RANDOM % 20000)); done
host=$(hostname -s)
mkdir -p "$tmp/state" "$tmp/spool"
: >"$tmp/plugstack.conf"
# The node as slurmd sees it (CPUs, sockets, memory); addresses on the loopback interface, so
# that a host name that does not resolve does not matter.
node=$(timeout 10 slurmd -C | head -n 1)
cat >"$tmp/slurm.conf" <<EOF
ClusterName=dgtest
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
SlurmctldPort=$port
SlurmdPort=$((port + 1))
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$tmp/munge.sock,cred_expire=10
StateSaveLocation=$tmp/state
SlurmdSpoolDir=$tmp/spool
SlurmctldPidFile=$tmp/slurmctld.pid
SlurmdPidFile=$tmp/slurmd.pid
SlurmctldLogFile=$tmp/slurmctld.log
SlurmdLogFile=$tmp/slurmd.log
PlugStackConfig=$tmp/plugstack.conf
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
ReturnToService=2
SchedulerType=sched/builtin
SchedulerParameters=sched_interval=2
$node NodeAddr=127.0.0.1 State=UNKNOWN
PartitionName=test Nodes=ALL Default=YES MaxTime=30 State=UP
EOF
export SLURM_CONF=$tmp/slurm.conf
unset SLURM_JOB_ID SLURM_JOBID  # a test run inside a Slurm job must not talk to that job
slurmctld -D -i >"$tmp/slurmctld.out" 2>&1 &
pids+=($!)
touch "$tmp/slurmctld.ready"
slurmd -D -N "$host" >"$tmp/slurmd.out" 2>&1 &
pids+=($!)
idle() { [ "$(timeout 5 sinfo -h -n "$host" -o %t 2>/dev/null)" = idle ]; }
wait_for 30 idle || skip "the one-node Slurm did not come up within 30 s: $(tail -n 3 "$tmp/slurmctld.out" "$tmp/slurmd.out")"
timeout 10 srun --mpi=list 2>&1 | grep pmix >/dev/null || skip "srun has no PMIx plugin (--mpi=pmix)"

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
sha() { python3 -c 'import json, sys; print(json.load(sys.stdin)["sha256"])'; }
# Every srun gets 120 s (SIGKILL 10 s after timeout's SIGTERM): a hang fails at its command.
par() { timeout -k 10 120 srun -n 2 --time=5 --mpi=pmix "$dg" "$@"; }

# 1. srun -n 2 against a serial run of the same grid.
shape=16x16x64 run_args=(--stencil 7pt --steps 5 --boundary periodic --threads 1)
"$dg" create "$tmp/serial" --shape "$shape" --init gaussian >/dev/null
"$dg" run "$tmp/serial" "${run_args[@]}" >/dev/null
want=$("$dg" checksum "$tmp/serial" --json | sha)
mkdir -p "$tmp/local/0" "$tmp/local/1"
par create "$tmp/d" --shape "$shape" --init gaussian --store "$tmp/local/%r" >/dev/null
[ -n "$(ls "$tmp/local/1")" ] || fail "rank 1 wrote nothing in its store"
par run "$tmp/d" "${run_args[@]}" >"$tmp/run.out"
grep "ranks       2" "$tmp/run.out" >/dev/null || fail "srun run was not one job of 2 ranks: $(cat "$tmp/run.out")"
[ "$(par checksum "$tmp/d" --json | sha)" = "$want" ] || fail "srun checksum differs from the serial grid's"
[ "$("$dg" checksum "$tmp/d" --json | sha)" = "$want" ] || fail "serial checksum of the srun grid differs"

# 2. The example, stopped by SIGINT to its ranks and requeued by itself.
shape=64x64x128 steps=2000
"$dg" create "$tmp/serial2" --shape "$shape" --init gaussian >/dev/null
"$dg" run "$tmp/serial2" --stencil 7pt --steps "$steps" --boundary periodic --threads 1 >/dev/null
want=$("$dg" checksum "$tmp/serial2" --json | sha)
job=$(cd "$tmp" && DEEPGRID=$dg GRID=$tmp/eg LOCAL_DISK=$tmp/nodelocal SHAPE=$shape STEPS=$steps \
  timeout 30 sbatch --parsable --nodes=1 --ntasks=2 --ntasks-per-node=2 --cpus-per-task=1 \
  --time=10 --output="$tmp/job.out" "$example")
state() { timeout 5 scontrol show job "$job" | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p'; }
restarts() { timeout 5 scontrol show job "$job" | sed -n 's/.*Restarts=\([0-9]*\).*/\1/p'; }
# The run records its range in GRID/run.json before its first round; SIGINT to the batch
# shell then stops it part-way (2000 steps take seconds; an exchange every few steps).
wait_for 60 test -e "$tmp/eg/run.json" || fail "the example's run did not start: $(cat "$tmp/job.out")"
timeout 10 scancel --batch --signal=INT "$job"
wait_for 60 eval '[ "$(restarts)" = 1 ] && [ "$(state)" = PENDING ]' ||
  fail "the job was not requeued after SIGINT: $(state), $(cat "$tmp/job.out")"
# srun: the ranks stop at the end of a pass and say so. (mpirun ends its ranks itself on
# SIGINT: the run is cut where it was and resumed from its last commit.)
if [ "${LAUNCH:-srun}" = srun ]; then
  grep "stopped early" "$tmp/job.out" >/dev/null || fail "the run did not stop early: $(cat "$tmp/job.out")"
fi
# A requeued job may start again cred_expire + 1 seconds later (the credentials of its first
# start are revoked until then; by default 121 s; an earlier start, StartTime=now, was refused
# as "Job credential revoked").
wait_for 180 eval '[ "$(state)" = COMPLETED ]' || fail "the requeued job did not complete: $(state), $(cat "$tmp/job.out")"
grep "resuming the run" "$tmp/job.out" >/dev/null || fail "the requeued job did not resume: $(cat "$tmp/job.out")"
grep "is at step $steps" "$tmp/job.out" >/dev/null || fail "the grid did not reach step $steps: $(cat "$tmp/job.out")"
[ "$(par checksum "$tmp/eg" --json | sha)" = "$want" ] || fail "the resumed grid differs from the serial run"
echo "== the example's log" && cat "$tmp/job.out"
echo "PASS: srun -n 2 --mpi=pmix and the sbatch example (stopped, requeued, resumed) match the serial runs"
