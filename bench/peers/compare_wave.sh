#!/usr/bin/env bash
# Devito vs deepgrid on the same wave problem (issue 31; bench/README.md, "Peer comparison").
#
# For each scheme: a check that both compute the same problem (devito_wave.py --check against
# deepgrid create/import/run/export on 48x40x36, 10 steps), then for each shape R rounds of
# Devito (autotuned, opt=advanced, f32) and `deepgrid bench` one after the other, and a table:
# every run's MLUP/s and the ratio of the medians, deepgrid / Devito.
#
#   bash bench/peers/compare_wave.sh [--schemes wave2,wave4,wave8] [--shapes 256x256x256,...]
#        [--steps 20] [--repeats 3] [--threads 2] [--deepgrid build/deepgrid] [--out FILE]
#        [--no-check]
#
# Devito lives in its own venv, ${DEVITO_VENV:-$HOME/.cache/deepgrid/devito-venv}, made here
# when missing with devito==${DEVITO_VERSION:-4.8.23} (the version these scripts were checked
# with). --out FILE.json writes the rows with every run's record, any other name CSV.
# OMP_PROC_BIND / OMP_PLACES, when set, apply to both tools alike; none are set here.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)

schemes=wave2,wave8
shapes=256x256x256
steps=20
repeats=3
threads=2
deepgrid=$repo/build/deepgrid
out=
check=1

usage() { sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; }

while [[ $# -gt 0 ]]; do
  case $1 in
    --schemes) schemes=$2; shift 2 ;;
    --shapes) shapes=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --repeats) repeats=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --deepgrid) deepgrid=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --no-check) check=0; shift ;;
    -h | --help) usage; exit 0 ;;
    *) echo "compare_wave.sh: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
  esac
done

for n in "$steps" "$repeats" "$threads"; do
  [[ $n =~ ^[1-9][0-9]*$ ]] || { echo "compare_wave.sh: '$n' is not a positive integer" >&2; exit 2; }
done
[[ -x $deepgrid ]] || { echo "compare_wave.sh: no deepgrid binary at $deepgrid (make build, or --deepgrid PATH)" >&2; exit 2; }
deepgrid=$(cd "$(dirname "$deepgrid")" && pwd)/$(basename "$deepgrid")

venv=${DEVITO_VENV:-$HOME/.cache/deepgrid/devito-venv}
version=${DEVITO_VERSION:-4.8.23}
py=$venv/bin/python
if ! [[ -x $py ]] || ! "$py" -c 'import devito' 2>/dev/null; then
  echo "compare_wave.sh: installing devito==$version into $venv" >&2
  python3 -m venv "$venv"
  "$py" -m pip install --quiet "devito==$version"
fi
have=$("$py" -c 'import devito; print(devito.__version__)')
[[ $have == "$version" ]] || echo "compare_wave.sh: note: $venv has devito $have, not $version" >&2

export OMP_NUM_THREADS=$threads DEVITO_LANGUAGE=openmp DEVITO_LOGGING=ERROR
export DEVITO_PROFILING=advanced

read -r load _ </proc/loadavg
if awk -v l="$load" -v t="$threads" 'BEGIN { exit !(l > 0.25 * t) }'; then
  echo "compare_wave.sh: warning: load average $load before starting: other work on the" \
    "machine slows both tools (OpenMP threads wait on each other), unevenly" >&2
fi

# CPU jiffies now: the machine's busy (steal included) and total, and what this shell's finished
# children used (cutime + cstime: a run's processes and theirs, once reaped).
cpu_mark() {
  local _cpu user nice system idle iowait irq softirq steal _rest stat
  read -r _cpu user nice system idle iowait irq softirq steal _rest </proc/stat
  stat=$(</proc/$$/stat)
  read -r -a f <<<"${stat##*) }" # fields from the 3rd on: cutime is the 16th, cstime the 17th
  echo "$((user + nice + system + irq + softirq + steal))" \
    "$((user + nice + system + idle + iowait + irq + softirq + steal))" "$((f[13] + f[14]))"
}

# Runs a command (its stdout appended to the records) and then records the share of the
# machine's CPU time that other processes and the hypervisor took while it ran.
timed_run() {
  local what=$1 busy0 total0 own0 busy1 total1 own1
  shift
  read -r busy0 total0 own0 < <(cpu_mark)
  "$@" >>"$records"
  read -r busy1 total1 own1 < <(cpu_mark)
  awk -v w="$what" -v s="$scheme" -v sh="$shape" -v st="$steps" \
    -v b=$((busy1 - busy0)) -v t=$((total1 - total0)) -v o=$((own1 - own0)) \
    'BEGIN { x = t > 0 ? (b - o) / t : 0; if (x < 0) x = 0
             printf "{\"tool\": \"cpu\", \"run\": \"%s\", \"scheme\": \"%s\", \"shape\": \"%s\", \"steps\": %d, \"others_cpu_share\": %.4f}\n", w, s, sh, st, x }' \
    >>"$records"
}

work=$(mktemp -d "${TMPDIR:-/tmp}/compare_wave.XXXXXX")
trap 'rm -rf "$work"' EXIT
records=$work/records.jsonl

IFS=, read -r -a scheme_list <<<"$schemes"
IFS=, read -r -a shape_list <<<"$shapes"
for scheme in "${scheme_list[@]}"; do  # all checked before any runs
  case $scheme in wave2 | wave4 | wave8) ;; *) echo "compare_wave.sh: scheme '$scheme' is not wave2, wave4 or wave8" >&2; exit 2 ;; esac
done
for scheme in "${scheme_list[@]}"; do
  if [[ $check == 1 ]]; then
    echo "== $scheme: check against deepgrid (48x40x36, 10 steps)" >&2
    if ! "$py" "$here/devito_wave.py" --check --scheme "$scheme" --deepgrid "$deepgrid" \
        --out-dir "$work/check_$scheme" >>"$records"; then
      tail -n 1 "$records" >&2
      echo "compare_wave.sh: $scheme: Devito and deepgrid disagree; no benchmark" >&2
      exit 1
    fi
  fi
  for shape in "${shape_list[@]}"; do
    for ((r = 1; r <= repeats; r++)); do
      echo "== $scheme $shape, $steps steps: round $r/$repeats: Devito" >&2
      timed_run devito "$py" "$here/devito_wave.py" --scheme "$scheme" --shape "$shape" \
        --steps "$steps" --autotune aggressive
      echo "== $scheme $shape, $steps steps: round $r/$repeats: deepgrid" >&2
      timed_run deepgrid "$deepgrid" bench --stencil "$scheme" --shape "$shape" \
        --steps "$steps" --dtype f32 --threads "$threads" --no-bandwidth --json
    done
  done
done

echo "Devito $have (venv $venv), $threads threads; MLUP/s: best of 3 timed applies/repeats per run" >&2
"$py" "$here/peer_table.py" "$records" ${out:+--out "$out"}
