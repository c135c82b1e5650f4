#!/usr/bin/env bash
# gpu_smoke.sh PHASE: from a bare lent H200 (with .whl carried) to stored results in /root/sb/h200.db.
#
#   bash scripts/gpu_smoke.sh check   HERE, before spending device time: sweeps valid, bundle complete, tree fits
#   bash scripts/gpu_smoke.sh 1       device call 1: bootstrap, checkpoint, sim preflight, main sweep to deadline
#   bash scripts/gpu_smoke.sh 2       device call 2 (and any later one): the SGLANG_SIMULATE_ACC_LEN twins,
#                                     then the main sweep resumed to the deadline (main first on a bare machine)
#
# The device call:  run(command="bash scripts/gpu_smoke.sh 1", carry=[".whl"], timeout_s=600); then call 2 within
# ~30 s, while the machine is still warm (it keeps /root: the unpacked bundle, JIT caches, checkpoint and DB).
# Every phase is idempotent: sweeps always run with --resume, the checkpoint and bundle are reused when present.
# If call 2 lands on a bare machine anyway, it re-bootstraps and rebuilds the (byte-identical) checkpoint; to keep
# resuming the same run, put call 1's h200.db at .gpu-state/h200.db and add ".gpu-state" to carry.
#
# $OUT gets at most 6 files (the tool returns 8): gpu_smoke-phaseN.log, env-phaseN.txt (nvidia-smi, pip list,
# provenance), h200.db (a consistent SQLite backup; .xz when over 15 MiB), logs-phaseN.tar.xz (server and
# runner logs), summary-phaseN.txt (runs, server starts, points as CSV), specbench_synth.json.
#
# ---- Budget (device seconds; README = the device recipe's timings on this toy model, ~ = estimate) ----
# Session: 1800 s. Machine start + tree transfer ~90, call 1 <= 600, gap <= 30 (machine still warm), call 2 <= 600,
# idle until given back 30  =>  ~1350 s. The ~450 s left allow ONE optional call 3 (`gpu_smoke.sh 2` again) on
# the same warm machine, never a fresh machine (90 s start + ~250 s cold server start).
# Each phase stops itself at SB_LIMIT_S=570 (30 s under the tool's 600 s, so the EXIT trap always collects):
#   hard stop (SIGINT to the runner) = time left - 20 collect - 20 teardown (server SIGTERM grace 15 s)
#   runner --deadline-s              = hard stop - 30 (the point in flight finishes; bs 32 ~15 s ~)
# Launches dominate: README first start on a fresh machine ~250 s (cold Triton/flashinfer JIT; cold .pyc, which
# a parallel compileall trims ~), every later start 60-75 s. 7 configs in h200-smoke + 2 SIMULATE_ACC_LEN twins
# = 1 cold + 8 warm: one at a time ~250 + 8 x 70 = ~810 s of launches against ~1070 s usable, which cannot fit.
# So h200-smoke sets max_parallel_starts 3: after the cold baseline, the six spec configs start three at a time
# (~90 s a batch ~: warm starts are CPU-bound, 16 cores) and are then measured one by one => ~250 + 2 x 90.
# Per start ~: disable-piecewise-cuda-graph (no dynamo trace, no ~42 prefill-graph captures; decode graphs as
# before); later `cuda-graph-bs: [1, 4, 16, 32]` (4 captures per graph runner instead of 20, see the sweep).
# Measuring, 128 new tokens (README rates ~400-750 tok/s single stream, ~1.2-3.2k tok/s aggregate at bs 8): a
# point is 1 warmup wave + 2 repeats x 4 waves (bs 1: 2 x 8): bs1 17 x ~0.25 s, bs4 9 x ~0.5, bs16 9 x ~0.9,
# bs32 9 x ~1.4  =>  ~30 s per spec config, ~16 s baseline, ~18 s per twin (bs 1, 16); 256 tokens doubles it.
# Call 1: bootstrap 6, checkpoint 3 (|| compileall), sim preflight 11, runner 5 => t~30; baseline 250 cold
#   + 16 + 5 => ~300; batch [v2 s3, v2 s1, v2 s2] 90 => ~390, measured 3 x ~33 => ~490, deadline ~485: the last
#   one or two points of v2 s2 may be left for call 2.
# Call 2: setup ~10; twins 2.5 and 1.8, ~95 each => ~200; main resumed: rest of v2 s2 70 + ~20 => ~290, batch
#   [v1 s3, v1 s1, v1 s2] 90 => ~380, 3 x ~33 => ~480 < deadline ~495.  Expected: everything in two calls, with
#   ~1 min of slack in each; if the estimates are off, the deadline cuts the tail and call 3 (same command)
#   resumes it. Without a runner --launch-margin-s (used when present) a launch started shortly before a
#   deadline is wasted (~70-90 s).
set -uo pipefail

PHASE=${1:-}
case "$PHASE" in
  check | 1 | 2 | 3 | 4) ;;
  *)
    echo "usage: bash scripts/gpu_smoke.sh check|1|2   (see the header)" >&2
    exit 64
    ;;
esac

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT" || exit 70

SB=${SB_DIR:-/root/sb}
OUT=${OUT:-$SB/out}
LIMIT=${SB_LIMIT_S:-570}
MAIN_SWEEP=${SB_MAIN_SWEEP:-sweeps/h200-smoke.yaml}
read -r -a SIMACC_SWEEPS <<< "${SB_SIMACC_SWEEPS-sweeps/h200-simacc.yaml sweeps/h200-simacc-1.8.yaml}"
PREFLIGHT_SWEEP=${SB_PREFLIGHT_SWEEP:-sweeps/h200-preflight-sim.yaml}
MIN_MAIN_S=${SB_MIN_MAIN_S:-160}      # runner deadline >= ~110 s: one warm launch batch and a few points
MIN_SIMACC_S=${SB_MIN_SIMACC_S:-130}  # runner deadline >= ~80 s: one warm launch and both points
LAUNCH_MARGIN=${SB_LAUNCH_MARGIN_S:-90}
COLLECT_S=20
TEARDOWN_S=20
TAIL_S=30
DB_FILE=$SB/h200.db
DB_URL="sqlite:///$DB_FILE"
LOGS=$SB/logs
SGL_SITE_DIR=${SGL_SITE:-/root/sgl-site}
MODEL=$SB/tiny_dsv3_agree  # replaced by the main sweep's `model` once python can read it
# sha256 of model.safetensors for `synth-model --mode agree --seed 0` at the default sizes, built on the CPU dev
# box (torch 2.13). Informational: a mismatch on the device means torch's CPU RNG stream differs there.
EXPECT_WEIGHTS_SHA=${SB_EXPECT_WEIGHTS_SHA:-6d1a281e36a7240f2bf80e961e2b5e3983828f1247fa3c8d553c2d0bc0344fde}
export COLUMNS=${COLUMNS:-150}

log() { echo "[gpu_smoke phase $PHASE +${SECONDS}s] $*"; }
left_s() { echo $((LIMIT - SECONDS - COLLECT_S)); }  # seconds until collection must start

# ------------------------------------------------------------------------------------------------ check (here)
if [ "$PHASE" = check ]; then
  PY=${PYTHON:-$ROOT/.venv/bin/python}
  [ -x "$PY" ] || PY=python3
  ok=1
  bash -n "${BASH_SOURCE[0]}" || ok=0
  main_model=$("$PY" -c 'import sys; from bench.sweep import load_sweep; print(load_sweep(sys.argv[1]).model)' \
    "$MAIN_SWEEP") || ok=0
  for y in "$MAIN_SWEEP" "${SIMACC_SWEEPS[@]}" "$PREFLIGHT_SWEEP"; do
    if dry=$("$PY" -m runners.cli run "$y" --dry-run 2>&1); then
      m=$("$PY" -c 'import sys; from bench.sweep import load_sweep; print(load_sweep(sys.argv[1]).model)' "$y")
      if [ "$m" != "$main_model" ]; then echo "FAIL $y: model $m differs from $main_model"; ok=0; fi
      echo "ok   $y: $(echo "$dry" | head -1)"
    else
      echo "$dry"
      echo "FAIL $y: not a valid sweep"
      ok=0
    fi
  done
  # The device preflight, here: the whole spine on the stand-in, every point must measure (~10 s).
  tmpd=$(mktemp -d)
  if "$PY" -m runners.cli run "$PREFLIGHT_SWEEP" --db "sqlite:///$tmpd/preflight.db" --log-dir "$tmpd/logs" \
    --no-progress > "$tmpd/out.txt" 2>&1; then
    bad=$("$PY" -c 'import sqlite3, sys
rows = sqlite3.connect(sys.argv[1]).execute("SELECT status, COUNT(*) FROM points GROUP BY status").fetchall()
print(" ".join(f"{s}={n}" for s, n in rows if s not in ("ok", "unstable")) if rows else "no-points")' \
      "$tmpd/preflight.db")
  else
    bad="runner exit code $?"
  fi
  if [ -z "$bad" ]; then
    echo "ok   preflight on the stand-in: every point measured"
  else
    tail -20 "$tmpd/out.txt"
    echo "FAIL preflight on the stand-in: $bad (the device call would abort at the same place)"
    ok=0
  fi
  rm -rf "$tmpd"
  if "$PY" -m runners.cli run --help 2>/dev/null | grep -q -- --launch-margin-s; then
    echo "ok   runner has --launch-margin-s (no launch is wasted at a deadline)"
  else
    echo "note runner lacks --launch-margin-s: a launch started shortly before a deadline is wasted (~70 s)"
  fi
  sumf=.whl/sgl-site.tar.xz.sha256
  if [ -f "$sumf" ] && [ -f .whl/bootstrap.sh ]; then
    for p in $(tail -n +2 "$sumf" | awk '{print $2}'); do
      [ -f ".whl/$p" ] || { echo "FAIL bundle piece .whl/$p missing"; ok=0; }
    done
    if ! (cd .whl && tail -n +2 sgl-site.tar.xz.sha256 | sha256sum -c --quiet -); then
      echo "FAIL bundle checksum"
      ok=0
    fi
  else
    echo "FAIL .whl/ has no bundle: SKIP_EXTRA=\"typing-extensions markupsafe python-dateutil six\" \\"
    echo "       bash scripts/device/build_bundle.sh sqlalchemy==2.1.9 alembic==1.20.1 croniter==7.0.0"
    ok=0
  fi
  git check-ignore -q .whl/ || echo "note .whl/ is not git-ignored: it would travel twice"
  tree=$(git ls-files -z --cached --others --exclude-standard | xargs -0 stat -c %s 2> /dev/null \
    | awk '{s+=$1} END {print s+0}')
  whl=$(du -sb .whl 2> /dev/null | cut -f1)
  total=$((tree + ${whl:-0}))
  echo "travel: tree $tree + .whl ${whl:-0} = $total bytes (limit 67108864 = 64 MiB)"
  [ "$total" -lt 67108864 ] || { echo "FAIL the call would carry more than 64 MiB"; ok=0; }
  [ "$ok" = 1 ] && echo "check: all good" || echo "check: FAILED"
  [ "$ok" = 1 ]
  exit $?
fi

# ------------------------------------------------------------------------------------------------ device phases
# Re-run under tee so the log in $OUT is complete (flushed) when this script returns.
if [ -z "${SB_TEED:-}" ]; then
  mkdir -p "$OUT"
  SB_TEED=1 bash "${BASH_SOURCE[0]}" "$@" 2>&1 | tee -a "$OUT/gpu_smoke-phase$PHASE.log"
  exit "${PIPESTATUS[0]}"
fi

PY=${PYTHON:-python3}
# The runner, with SIGINT restored: a parent may start us with SIGINT ignored, and then `timeout -s INT` would
# not reach the runner's KeyboardInterrupt path (finish the run row, stop the server's process group).
RUNNER=("$PY" -c 'import runpy, signal, sys
signal.signal(signal.SIGINT, signal.default_int_handler)
runpy.run_module("runners.cli", run_name="__main__", alter_sys=True)')
mkdir -p "$SB" "$LOGS" "$OUT"
MAIN_RC=none
SWEEP_FAILED=0
FINAL_RC=  # set on every deliberate exit; empty means the script itself broke (then its own exit code)

# reap_gpu: stop GPU processes left behind (a server started with its own session outlives a killed runner and
# would hold its memory into the next config or call). This machine is lent to us alone; by pid, never by name.
reap_gpu() {
  command -v nvidia-smi > /dev/null || return 0
  local pids pid pgid mine left
  pids=$(nvidia-smi --query-compute-apps=pid --format=csv,noheader 2> /dev/null | tr -d ' ')
  [ -n "$pids" ] || return 0
  mine=$(ps -o pgid= -p $$ | tr -d ' ')
  for pid in $pids; do
    [[ $pid =~ ^[0-9]+$ ]] || continue
    pgid=$(ps -o pgid= -p "$pid" 2> /dev/null | tr -d ' ')
    log "leftover GPU process $pid (group ${pgid:-?}): SIGTERM"
    if [[ $pgid =~ ^[0-9]+$ ]] && [ "$pgid" -gt 1 ] && [ "$pgid" != "$mine" ]; then
      kill -TERM -- "-$pgid" 2> /dev/null
    else
      kill -TERM "$pid" 2> /dev/null
    fi
  done
  sleep 5
  left=$(nvidia-smi --query-compute-apps=pid --format=csv,noheader 2> /dev/null | tr -d ' ')
  for pid in $left; do
    [[ $pid =~ ^[0-9]+$ ]] && { log "GPU process $pid still there: SIGKILL"; kill -KILL "$pid" 2> /dev/null; }
  done
}

# snapshot_db: a consistent copy of the SQLite DB (backup API: safe with WAL) into $OUT.
snapshot_db() {
  [ -f "$DB_FILE" ] || return 0
  rm -f "$OUT/h200.db" "$OUT/h200.db.xz"
  timeout 60 "$PY" - "$DB_FILE" "$OUT/h200.db" << 'PY' || log "DB snapshot failed"
import sqlite3, sys
src, dst = sqlite3.connect(sys.argv[1], timeout=30), sqlite3.connect(sys.argv[2])
with dst:
    src.backup(dst)
dst.close()
src.close()
PY
  if [ -f "$OUT/h200.db" ] && [ "$(stat -c %s "$OUT/h200.db")" -gt 15728640 ]; then
    timeout 60 xz -T0 -6 "$OUT/h200.db" || log "DB compression failed"
  fi
}

# summarize: runs, server starts and points as CSV into $OUT (all columns), and a short table on stdout.
summarize() {
  [ -f "$DB_FILE" ] || return 0
  timeout 60 "$PY" - "$DB_FILE" "$OUT/summary-phase$PHASE.txt" << 'PY' || log "summary failed"
import csv, sqlite3, sys
con = sqlite3.connect(sys.argv[1], timeout=30)
con.row_factory = sqlite3.Row
def cols(table):
    return [r[1] for r in con.execute(f"PRAGMA table_info({table})")]
with open(sys.argv[2], "w", newline="") as f:
    for table in ("runs", "server_instances", "points"):
        names = cols(table)
        if not names:
            continue
        f.write(f"## {table}\n")
        w = csv.writer(f)
        w.writerow(names)
        for row in con.execute(f"SELECT * FROM {table} ORDER BY id"):
            w.writerow([row[n] for n in names])
        f.write("\n")
def pick(table, wanted):
    have = set(cols(table))
    return [c for c in wanted if c in have]
runs = pick("runs", ["id", "sweep_name", "status", "sglang_version", "gpu_name", "simulated", "error"])
if runs:
    print("runs:")
    for r in con.execute(f"SELECT {', '.join(runs)} FROM runs ORDER BY id"):
        print("  " + " | ".join(str(r[c])[:80] for c in runs))
srv = pick("server_instances", ["run_id", "label", "status", "startup_s", "spec_mode_resolved", "mismatches"])
if srv:
    print("server starts:")
    for r in con.execute(f"SELECT {', '.join(srv)} FROM server_instances ORDER BY id"):
        vals = [f"{r[c]:.1f}s" if c == "startup_s" and r[c] is not None else str(r[c])[:60] for c in srv]
        print("  " + " | ".join(vals))
pts = pick("points", ["run_id", "algorithm", "steps", "spec_mode", "batch_size", "status", "repeats",
                      "output_throughput", "accept_length", "server_accept_length", "ttft_p50_ms", "tpot_p50_ms",
                      "reason"])
if pts:
    print("points:")
    print("  " + " | ".join(pts))
    for r in con.execute(f"SELECT {', '.join(pts)} FROM points ORDER BY id"):
        vals = [f"{r[c]:.2f}" if isinstance(r[c], float) else str(r[c])[:70] for c in pts]
        print("  " + " | ".join(vals))
PY
}

collect() {
  log "collecting into \$OUT"
  snapshot_db
  summarize
  local dirs=() d
  for d in logs logs-preflight; do [ -d "$SB/$d" ] && dirs+=("$d"); done
  if [ "${#dirs[@]}" -gt 0 ]; then
    rm -f "$OUT/logs-phase$PHASE.tar.xz"
    local tarball=$OUT/logs-phase$PHASE.tar.xz
    timeout 60 tar -C "$SB" -cJf "$tarball" "${dirs[@]}" 2> /dev/null || log "log archive failed"
    if [ -f "$tarball" ] && [ "$(stat -c %s "$tarball")" -gt 15728640 ]; then
      log "log archive over 15 MiB: keeping the last 2 MB of each log instead"
      rm -rf "$SB/logs-tail" && mkdir -p "$SB/logs-tail"
      find "$LOGS" -type f -name '*.log' | while read -r f; do
        tail -c 2000000 "$f" > "$SB/logs-tail/$(basename "$f")"
      done
      timeout 60 tar -C "$SB" -cJf "$tarball" logs-tail 2> /dev/null
    fi
  fi
  [ -f "$MODEL/specbench_synth.json" ] && cp -f "$MODEL/specbench_synth.json" "$OUT/" 2> /dev/null
  ls -l "$OUT"
}

on_exit() {
  local rc=$?
  trap - EXIT
  reap_gpu
  collect
  FINAL_RC=${FINAL_RC:-$rc}
  log "done (exit $FINAL_RC); main sweep rc $MAIN_RC"
  exit "$FINAL_RC"
}
trap on_exit EXIT
trap 'log "SIGINT/SIGTERM: stopping"; FINAL_RC=130; exit 130' INT TERM

die() {
  log "ABORT: $*"
  FINAL_RC=1
  exit 1
}

describe_rc() {
  case "$1" in
    0) echo "complete" ;;
    3) echo "partial: deadline reached, resumable" ;;
    124) echo "hard-stopped by SIGINT at the time limit, resumable" ;;
    137) echo "killed after the teardown grace" ;;
    *) echo "FAILED" ;;
  esac
}

# run_sweep YAML DB_URL LOGDIR: one runner invocation that ends before collection time.
HAVE_MARGIN=0
run_sweep() {
  local yaml=$1 url=$2 logdir=$3
  local left hard deadline rc
  left=$(left_s)
  hard=$((left - TEARDOWN_S))
  deadline=$((hard - TAIL_S))
  if [ "$deadline" -lt 30 ]; then
    log "skip $yaml: ${left}s left"
    return 99
  fi
  local argv=("${RUNNER[@]}" run "$yaml" --db "$url" --resume --deadline-s "$deadline"
    --log-dir "$logdir" --no-progress)
  [ "$HAVE_MARGIN" = 1 ] && argv+=(--launch-margin-s "$LAUNCH_MARGIN")
  log "run $yaml: deadline ${deadline}s, hard stop ${hard}s"
  timeout -s INT -k "$TEARDOWN_S" "$hard" "${argv[@]}"
  rc=$?
  reap_gpu
  log "$yaml: rc $rc ($(describe_rc "$rc"))"
  case "$rc" in 0 | 3 | 124) ;; *) SWEEP_FAILED=2 ;; esac
  snapshot_db
  return "$rc"
}

# ---------------------------------------------------------------------------------------------- 1. environment
log "start on $(hostname) ($(nproc) cores), limit ${LIMIT}s, root $SB, out $OUT"
BARE=1
[ -f "$SGL_SITE_DIR/.bundle-sha256" ] && BARE=0
[ "$BARE" = 1 ] && [ "$PHASE" != 1 ] && log "WARNING: bare machine in phase $PHASE: cold start again"
reap_gpu
if [ "${SB_SKIP_BOOTSTRAP:-0}" != 1 ]; then
  # shellcheck disable=SC1091
  source .whl/bootstrap.sh || die "bootstrap failed (did the call carry .whl? see its message above)"
fi
[ -n "${SPECBENCH_GIT_COMMIT:-}" ] || [ -d .git ] \
  || log "note: no .git here; prefix the command with SPECBENCH_GIT_COMMIT=<sha> to record the commit"

MODEL=$("$PY" -c 'import sys; from bench.sweep import load_sweep; print(load_sweep(sys.argv[1]).model)' \
  "$MAIN_SWEEP") \
  || die "cannot read $MAIN_SWEEP (a broken sweep or a missing package: see above)"
if "$PY" -m runners.cli run --help 2> /dev/null | grep -q -- --launch-margin-s; then HAVE_MARGIN=1; fi

COMPILE_PID=
if [ "$BARE" = 1 ] && [ -d "$SGL_SITE_DIR/sglang" ]; then
  # The first server start imports sglang's huge tree with cold .pyc (~30 s single-threaded); compile it on all
  # cores while the checkpoint and the preflight run.
  (cd "$SGL_SITE_DIR" && timeout 120 "$PY" -m compileall -q -j 0 sglang sgl_kernel flashinfer transformers \
    > /dev/null 2>&1) &
  COMPILE_PID=$!
fi



# ---------------------------------------------------------------------------------------------- 2. checkpoint
if [ -f "$MODEL/specbench_synth.json" ]; then
  log "checkpoint present: $MODEL"
else
  log "building the agree checkpoint in $MODEL"
  force=()
  [ -e "$MODEL" ] && force=(--force)
  "$PY" -m runners.cli synth-model "$MODEL" --mode agree --seed 0 "${force[@]}" || die "synth-model failed"
  sha=$("$PY" -c 'import json, sys; print(json.load(open(sys.argv[1]))["sha256"]["model.safetensors"])' \
    "$MODEL/specbench_synth.json")
  if [ "$sha" = "$EXPECT_WEIGHTS_SHA" ]; then
    log "weights sha256 equals the dev box's: the seed gives the same bytes on both machines"
  else
    log "note: weights sha256 $sha differs from the dev box's $EXPECT_WEIGHTS_SHA (torch CPU RNG differs here)"
  fi
fi

# Environment record, in the background while the preflight runs (after the checkpoint: provenance hashes it).
(
  echo "# gpu_smoke phase $PHASE, $(date -u +%Y-%m-%dT%H:%M:%SZ), host $(hostname)"
  echo "## uname / cpu / memory / disk"
  uname -a
  nproc
  free -g
  df -h "$SB"
  echo "## nvidia-smi"
  nvidia-smi
  nvidia-smi --query-gpu=index,name,driver_version,memory.total,clocks.max.sm,clocks.max.mem,power.limit,pstate \
    --format=csv
  echo "## nvcc"
  nvcc --version
  echo "## environment"
  env | grep -E '^(PYTHONPATH|LD_LIBRARY_PATH|CUDA_HOME|CUDA_VISIBLE_DEVICES|HF_|TRANSFORMERS_|SGLANG_)' | sort
  env | grep -E '^(NCCL_|TORCH_|NVSHMEM_)' | sort
  echo "## specbench provenance (bench/provenance.py, as the runner records it)"
  "$PY" -c 'import json, sys
from bench.provenance import collect_provenance
print(json.dumps(collect_provenance(sys.argv[1]), indent=1))' "$MODEL"
  echo "## pip list (device image + bundle on PYTHONPATH)"
  "$PY" -m pip list --format=freeze --disable-pip-version-check
) > "$OUT/env-phase$PHASE.txt" 2>&1 &
ENV_PID=$!

# ---------------------------------------------------------------------------------------------- 3. preflight
if [ -f "$SB/preflight.ok" ]; then
  log "preflight passed earlier on this machine"
else
  log "preflight: the spine on the stand-in server ($PREFLIGHT_SWEEP)"
  rm -f "$SB/preflight.db"
  timeout -s INT -k 10 120 "${RUNNER[@]}" run "$PREFLIGHT_SWEEP" --db "sqlite:///$SB/preflight.db" \
    --deadline-s 90 --log-dir "$SB/logs-preflight" --no-progress
  rc=$?
  if [ "$rc" = 0 ]; then
    # rc 0 only says the sweep ran through; every point must also have measured something.
    bad=$("$PY" -c 'import sqlite3, sys
rows = sqlite3.connect(sys.argv[1]).execute("SELECT status, COUNT(*) FROM points GROUP BY status").fetchall()
print(" ".join(f"{s}={n}" for s, n in rows if s not in ("ok", "unstable")) if rows else "no-points")' \
      "$SB/preflight.db" 2>&1) || bad="unreadable: $bad"
    [ -z "$bad" ] || rc="points($bad)"
  fi
  if [ "$rc" = 0 ]; then
    touch "$SB/preflight.ok"
  elif [ "${SB_IGNORE_PREFLIGHT:-0}" = 1 ]; then
    log "preflight failed (rc $rc); going on because SB_IGNORE_PREFLIGHT=1"
  else
    die "preflight failed (rc $rc): the spine is broken here; fix it before paying the cold start" \
      "(SB_IGNORE_PREFLIGHT=1 goes on anyway)"
  fi
fi
if [ -n "$COMPILE_PID" ]; then
  wait "$COMPILE_PID"
  log "compileall finished"
fi
wait "$ENV_PID"

# ---------------------------------------------------------------------------------------------- 4. sweeps
if [ ! -f "$DB_FILE" ] && [ -f .gpu-state/h200.db ]; then
  log "seeding $DB_FILE from the carried .gpu-state/h200.db (resume after a lost machine)"
  cp .gpu-state/h200.db "$DB_FILE"
fi
[ "$HAVE_MARGIN" = 1 ] || log "note: runner has no --launch-margin-s; a launch just before a deadline is wasted"

run_simacc() {
  local y
  for y in "${SIMACC_SWEEPS[@]}"; do
    if [ "$(left_s)" -ge "$MIN_SIMACC_S" ]; then
      run_sweep "$y" "$DB_URL" "$LOGS"
    else
      log "skip $y: $(left_s)s left, it needs ${MIN_SIMACC_S}s (run phase 2 again to finish it)"
    fi
  done
}
run_main() {
  if [ "$(left_s)" -lt "$MIN_MAIN_S" ]; then
    log "skip $MAIN_SWEEP: $(left_s)s left, it needs ${MIN_MAIN_S}s"
    return 0
  fi
  run_sweep "$MAIN_SWEEP" "$DB_URL" "$LOGS"
  MAIN_RC=$?
}
if [ "$PHASE" = 1 ] || [ "$BARE" = 1 ]; then
  # A cold start is the expensive part of a fresh machine: spend it on the main grid.
  run_main
  run_simacc
else
  # Warm machine: the one-config twins first. They take a predictable ~95 s each and never leave a wasted
  # launch behind, so the main grid can then run to the deadline without any time reserved after it.
  run_simacc
  run_main
fi
# 0 when every invocation ran or stopped cleanly (complete, deadline, hard stop, skipped): all resumable.
FINAL_RC=$SWEEP_FAILED
exit "$FINAL_RC"
