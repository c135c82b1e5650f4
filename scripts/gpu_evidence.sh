#!/usr/bin/env bash
# gpu_evidence.sh: the FlashMLA speculative v1/v2 evidence on one Hopper GPU host, end to end.
#
#   1. model:      the config-only model the sweep names (weights are initialised on the GPU by
#                  --load-format dummy), with a synthetic tokenizer so text-mode clients work offline: a
#                  `.models/<preset>-<N>l` directory is `synth-model --preset <preset> --layers <N>`
#                  (deepseek-v3-slice-4l, deepseek-v3-tp8-shard-40l, deepseek-v3-tp8-shard-61l, ...);
#   2. sweep:      sweeps/h200-v3slice-paired.yaml: v1 and v2 up together, repeats interleaved ABBA,
#                  >= 10 s windows, a drift check at the end, SGLang profiles at batch 1, 8, 32;
#   3. crosscheck: SGLang's own bench_serving against specbench's client on one server of the same shape;
#   4. extra:      sweeps/h200-v3slice-steps1.yaml (a second pair), bounded by EXTRA_DEADLINE_S;
#   5. report:     the v2-vs-v1 and spec-vs-baseline tables (Markdown, CSV), run cost and profile summaries
#                  next to the database.
#
# Needs sglang installed (docs/guide/gpu-hosts.md; on an offline host `source .whl/<release>/bootstrap.sh` first,
# with SPECBENCH="python3 -m runners.cli") and one Hopper GPU with ~110 GB free.
# About 25 minutes on an H200 from a cold start (the first server start JIT-compiles for ~4-5 minutes).
# Usage:  bash scripts/gpu_evidence.sh [WORK_DIR]          (default: ./evidence)
#         STEPS="sweep report" bash scripts/gpu_evidence.sh   runs only those steps
#         END_BY=EPOCH_SECONDS ...   finish by then: later steps are skipped or cut (a nightly window)
#         SWEEP=sweeps/h200-v3slice-intervals.yaml ...   measure another sweep in the sweep step (and build the
#                                        model it names: SWEEP=sweeps/h200-v3shard-40l-paired.yaml for the TP-8 shard,
#                                        SWEEP=sweeps/h200x8-v3-tp8.yaml for the whole model at TP 8 on 8 GPUs)
#         EXTRA_SWEEP=none ...          the extra step's sweep (default sweeps/h200-v3slice-steps1.yaml; none: skip)
#         CROSSCHECK_SWEEP=sweeps/h200-v3slice-profile-cpu.yaml ...   also run this (backend external) sweep
#                                        against the cross-check's server while it is up
#         CROSSCHECK_ROUNDS=2 ...       A B B A rounds per batch size in the cross-check (default 2)
#         CROSSCHECK_BATCH_SIZES=8 ...  its batch sizes (default 8,32)
#         CROSSCHECK_RESERVE_S=600 ...   with END_BY: stop the sweep this long before END_BY so the cross-check
#                                        still runs (default 0: the sweep may use all the time)
#         JIT_CACHE=jit.tar.xz ...      unpack this JIT cache archive (scripts/jit_cache.sh) before the first
#                                        server start when it exists; save one there after the run when not
#         CLIENT_CPUS=4-7,12-15 ...     pin the benchmark client there (`specbench run --client-cpus`) in the
#                                        sweep steps; pair it with the sweep's server.cpu_affinity
#                                        (sweeps/h200-v3slice-pinned.yaml, docs/guide/gpu-hosts.md "Pinning CPUs")
#         SNAPSHOT_TO=/mnt/keep/evidence.db ...   while the steps run, write a consistent copy of the database
#                                        there every SNAPSHOT_EVERY_S seconds (default 300) and once at the end
#                                        (`specbench db snapshot`): a host lost mid-run loses at most that much;
#                                        put the copy back as WORK_DIR/evidence.db on the next host and rerun
# Every step is idempotent: the sweeps resume (--resume), the model is reused when present.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
WORK=$(mkdir -p "${1:-evidence}" && cd "${1:-evidence}" && pwd)
STEPS=${STEPS:-model sweep crosscheck extra report}
SB=(${SPECBENCH:-specbench})               # e.g. SPECBENCH="python3 -m runners.cli" on a host without the entry point
PY=${PYTHON:-python3}
SWEEP=${SWEEP:-sweeps/h200-v3slice-paired.yaml}
EXTRA_SWEEP=${EXTRA_SWEEP:-sweeps/h200-v3slice-steps1.yaml}
# The model directory the sweep names (its `model:` line); MODEL=... overrides it.
MODEL=${MODEL:-$(sed -n 's/^model:[[:space:]]*\([^[:space:]#]*\).*/\1/p' "$SWEEP" | head -1)}
MODEL=${MODEL:-.models/deepseek-v3-slice-4l}
RESERVE=${CROSSCHECK_RESERVE_S:-0}
ROUNDS=${CROSSCHECK_ROUNDS:-2}
CC_SIZES=${CROSSCHECK_BATCH_SIZES:-8,32}
# A cross-check needs its server (up to ~250 s cold) plus ~75 s per round and batch size.
CROSSCHECK_NEEDS=$((250 + 75 * ROUNDS * $(echo "$CC_SIZES" | tr ',' '\n' | wc -l)))
DB="sqlite:///$WORK/evidence.db"
PIN=(); [ -n "${CLIENT_CPUS:-}" ] && PIN=(--client-cpus "$CLIENT_CPUS")
export SPECBENCH_ARTIFACTS_DIR=$WORK/artifacts
export COLUMNS=${COLUMNS:-160}
log() { echo "[gpu_evidence +${SECONDS}s] $*"; }
has() { case " $STEPS " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
left() { if [ -n "${END_BY:-}" ]; then echo $((END_BY - $(date +%s))); else echo 999999; fi; }

snapshot() {
  [ -f "$WORK/evidence.db" ] || return 0
  # One snapshot at a time (flock, where the host has it): the final one must not be overtaken by a periodic
  # one that began earlier and renames an older copy into place after it.
  local lock=(); command -v flock > /dev/null && lock=(flock "$WORK/.snapshot.lock")
  if "${lock[@]}" "${SB[@]}" db snapshot "$WORK/evidence.db" "$SNAPSHOT_TO" --force > /dev/null 2>&1; then
    log "snapshot: $SNAPSHOT_TO"
  else
    log "snapshot: FAILED writing $SNAPSHOT_TO"
  fi
}
snapshotter=""
if [ -n "${SNAPSHOT_TO:-}" ]; then
  # A loop beside the steps; it ends with this script (checked every period) or at the final snapshot.
  # The sleep gets no stdout, so that a sleep outliving the stopped loop can never hold the caller's pipe
  # (`gpu_evidence.sh | tee log`) open for the rest of a period.
  ( while sleep "${SNAPSHOT_EVERY_S:-300}" > /dev/null 2>&1 < /dev/null && kill -0 $$ 2> /dev/null; do
    snapshot
  done ) &
  snapshotter=$!
fi

if [ -n "${JIT_CACHE:-}" ] && [ -f "$JIT_CACHE" ]; then
  log "jit cache: restoring $JIT_CACHE"
  bash scripts/jit_cache.sh restore "$JIT_CACHE" || log "jit cache: restore failed, starting cold"
fi

if has model && [ ! -f "$MODEL/config.json" ]; then
  # `.models/<preset>[-<N>l][-tp<W>]`: the preset's config with N layers (the published count without a
  # suffix), split W ways (the shard preset only; -tp1 is the whole model, for a `server.tp: 8` sweep).
  if [[ $(basename "$MODEL") =~ ^(deepseek-v3-slice|deepseek-v3-tp8-shard|deepseek-v2-lite)(-([0-9]+)l)?(-tp([0-9]+))?$ ]]; then
    preset=${BASH_REMATCH[1]} layers=${BASH_REMATCH[3]} width=${BASH_REMATCH[5]}
    log "model: $MODEL (--preset $preset${layers:+ --layers $layers}${width:+ --tp $width})"
    "${SB[@]}" synth-model "$MODEL" --preset "$preset" ${layers:+--layers "$layers"} ${width:+--tp "$width"}
  else
    log "model: $MODEL is missing and its name names no preset; build it, or set MODEL"
    exit 2
  fi
fi
if has model && [ ! -f "$MODEL/tokenizer.json" ]; then  # for the text-mode client of the cross-check
  "$PY" -m synthetic.model.tokenizer "$MODEL"
fi

if has sweep; then
  cut=(); [ -n "${END_BY:-}" ] && cut=(--deadline-s "$(($(left) - 90 - RESERVE))")
  log "sweep: $SWEEP (paired v1/v2 with profiles) ${cut[*]} ${PIN[*]}"
  "${SB[@]}" run "$SWEEP" --db "$DB" --log-dir "$WORK/logs" --resume --no-progress \
    "${cut[@]}" "${PIN[@]}" || log "sweep exit $?"
fi

if has crosscheck && [ "$(left)" -lt "$CROSSCHECK_NEEDS" ]; then log "crosscheck: skipped, $(left) s left before END_BY"; fi
if has crosscheck && [ "$(left)" -ge "$CROSSCHECK_NEEDS" ]; then
  # One server of the pair's shape (v2, steps 3, acceptance 2.5), with metrics for the token check.
  port=${CROSSCHECK_PORT:-30123}
  log "crosscheck: starting a server on :$port"
  touch "$WORK/.crosscheck-start"   # what this start compiles: the JIT cache files newer than this marker
  # Balanced expert routing as specbench sets it for dummy weights (docs/reference/synthetic-models.md; a no-op
  # on SGLang 0.5.12, which has no such switch).
  SGLANG_SIMULATE_ACC_LEN=2.5 SGLANG_SIMULATE_UNIFORM_EXPERTS=1 "$PY" -m sglang.launch_server --model-path "$MODEL" --load-format dummy \
    --attention-backend flashmla --speculative-algorithm NEXTN --speculative-num-steps 3 \
    --speculative-eagle-topk 1 --speculative-num-draft-tokens 4 --mem-fraction-static 0.8 \
    --max-total-tokens 65536 --max-running-requests 64 --cuda-graph-max-bs 64 --disable-piecewise-cuda-graph \
    --grammar-backend none --enable-metrics --host 127.0.0.1 --port "$port" > "$WORK/crosscheck-server.log" 2>&1 &
  server=$!
  trap 'kill "$server" 2>/dev/null || true' EXIT
  if "$PY" - "$port" <<'PY'
import sys, time, urllib.request
url = f"http://127.0.0.1:{sys.argv[1]}/health_generate"
deadline = time.time() + 900
while time.time() < deadline:
    try:
        if urllib.request.urlopen(url, timeout=10).status == 200:
            sys.exit(0)
    except Exception:
        time.sleep(2)
sys.exit(1)
PY
  then
    log "crosscheck: server up"
    find ~/.cache ~/.triton /tmp/torchinductor_* ~/.nv -type f -newer "$WORK/.crosscheck-start" 2>/dev/null \
      | sed "s|^$HOME|~|" | awk -F/ '{print $2"/"$3}' | sort | uniq -c > "$WORK/crosscheck-jit-new.txt" || true
    "${SB[@]}" crosscheck --url "http://127.0.0.1:$port" --tokenizer "$MODEL" --batch-sizes "$CC_SIZES" \
      --input-len 256 --output-len 256 --min-window-s 10 --rounds "$ROUNDS" --out-dir "$WORK/crosscheck" || log "crosscheck exit $?"
    if [ -n "${CROSSCHECK_SWEEP:-}" ] && [ "$(left)" -ge 120 ]; then
      # e.g. sweeps/h200-v3slice-profile-cpu.yaml: a CPU+GPU profile of this server, for the profiler's distortion
      log "crosscheck: $CROSSCHECK_SWEEP against the same server"
      "${SB[@]}" run "$CROSSCHECK_SWEEP" --db "$DB" --log-dir "$WORK/logs" --no-progress || log "crosscheck sweep exit $?"
    fi
  else
    log "crosscheck: server did not come up (see $WORK/crosscheck-server.log)"
  fi
  kill "$server" 2>/dev/null || true
  wait "$server" 2>/dev/null || true
  trap - EXIT
fi

if has extra && [ "$EXTRA_SWEEP" = none ]; then log "extra: none (EXTRA_SWEEP=none)"
elif has extra && [ "$(left)" -ge 360 ]; then
  # Leave time for the point in flight, the drift check and teardown when END_BY cuts the sweep.
  cut=(); [ -n "${END_BY:-}" ] && cut=(--deadline-s "$(($(left) - 150))")
  log "extra: second pair ${cut[*]}"
  "${SB[@]}" run "$EXTRA_SWEEP" --db "$DB" --log-dir "$WORK/logs" --resume --no-progress "${PIN[@]}" \
    "${cut[@]}" || log "extra exit $?"
elif has extra; then log "extra: skipped, $(left) s left before END_BY"; fi

if [ -n "${JIT_CACHE:-}" ] && [ ! -f "$JIT_CACHE" ]; then
  bash scripts/jit_cache.sh save "$JIT_CACHE" || log "jit cache: nothing saved"
fi

if has report; then
  log "report"
  for name in $(basename "$SWEEP" .yaml) $(basename "$EXTRA_SWEEP" .yaml) $(basename "${CROSSCHECK_SWEEP:-none}" .yaml); do
    id=$("$PY" - "$WORK/evidence.db" "$name" <<'PY'
import sqlite3, sys
row = sqlite3.connect(sys.argv[1]).execute(
    "SELECT max(id) FROM runs WHERE sweep_name = ?", (sys.argv[2],)).fetchone()
print(row[0] or "")
PY
)
    [ -n "$id" ] || continue
    "${SB[@]}" export --db "$DB" --run "$id" --view v2-vs-v1 --format md > "$WORK/$name-v2-vs-v1.md" || true
    "${SB[@]}" export --db "$DB" --run "$id" --view v2-vs-v1 --format csv > "$WORK/$name-v2-vs-v1.csv" || true
    "${SB[@]}" export --db "$DB" --run "$id" --view spec-vs-baseline --format md > "$WORK/$name-spec-vs-baseline.md" || true
    "${SB[@]}" export --db "$DB" --run "$id" --view spec-vs-baseline --format csv > "$WORK/$name-spec-vs-baseline.csv" || true
    "${SB[@]}" export --db "$DB" --run "$id" --format md --all-status > "$WORK/$name-points.md" || true
    "${SB[@]}" export --db "$DB" --run "$id" --view windows --format csv > "$WORK/$name-windows.csv" || true
    "$PY" benchmarks/run_cost.py --db "$DB" --run "$id" > "$WORK/$name-cost.txt" 2>&1 || true
  done
  for t in "$WORK"/artifacts/run-*/point-*/*.trace.json.gz; do
    [ -e "$t" ] || continue
    "${SB[@]}" profile summarize "$t" --format json > "${t%.trace.json.gz}.summary.json" 2>/dev/null || true
  done
fi
if [ -n "$snapshotter" ]; then
  kill "$snapshotter" 2> /dev/null || true
  wait "$snapshotter" 2> /dev/null || true
  snapshot
fi
log "done"
