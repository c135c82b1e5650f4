#!/usr/bin/env bash
# flashmla_draft_fix.sh: FlashMLA's draft-decode defect and its fix, proved and priced on one Hopper GPU
# (docs/results/2026-12-06-flashmla-draft-decode-context.md; docs/reference/sglang-contract.md §1.10).
#
#   proof: the correctness gate on the mirror checkpoint (sweeps/flashmla-draft-fix-proof.yaml: baseline, NEXTN
#          steps 2, 3 and 4, v1 and v2, batch 1 and 8, CUDA graphs on), three runs side by side on the GPU:
#          the SGLang as released, the same SGLang patched, and triton attention (the control,
#          sweeps/correctness-triton-control.yaml). Speed is not the point here (three runs share the GPU);
#   cost:  what the fix costs in speed on the TP-8 shard (sweeps/flashmla-draft-fix-cost.yaml), unpatched then
#          patched, one after the other, alone on the GPU, each into its own database;
#   report: each launch's gate verdict, and the cost runs compared.
#
# Needs the offline bundle of sglang 0.5.13.post1 in .whl/ (scripts/offline-bundle/build_bundle.sh; the patch is
# made against that release) and one Hopper GPU (~65 GB free for the cost step's pair; an H100 measures that pair
# by restarts). The patched copy sits beside the unpatched one ($HOME/sgl-site-<release>+<patch>, bootstrap.sh
# SGL_PATCH); every run records which it used (`specbench runs` says "patched").
# About 20 minutes from a cold host (the first server start compiles kernels for ~4 minutes).
# Usage:  bash scripts/flashmla_draft_fix.sh [WORK_DIR]        (default: ./fix-evidence)
#         STEPS="proof" ...     only those steps (model proof cost report)
#         PATCH=FILE ...        another patch (default: the one for 0.5.13.post1 under scripts/offline-bundle/patches)
#         END_BY=EPOCH_SECONDS ...   finish by then (a nightly window): the cost runs stop at it (--deadline-s),
#                               each gets an equal part of what is left, and one that would get under 3 minutes
#                               is skipped; the proof always runs
# Every step resumes (--resume): run it again after an interruption and it measures only what is missing.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
WORK=$(mkdir -p "${1:-fix-evidence}" && cd "${1:-fix-evidence}" && pwd)
STEPS=${STEPS:-model proof cost report}
PATCH=${PATCH:-scripts/offline-bundle/patches/flashmla-draft-decode-context-0.5.13.post1.patch}
export COLUMNS=${COLUMNS:-160}
log() { echo "[flashmla_draft_fix +${SECONDS}s] $*"; }
has() { case " $STEPS " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
left() { if [ -n "${END_BY:-}" ]; then echo $((END_BY - $(date +%s))); else echo 999999; fi; }

# sb unpatched|patched ARGS...: specbench in a shell that imports that SGLang.
sb() {
  local which=$1; shift
  (
    if [ "$which" = patched ]; then export SGL_PATCH=$PATCH; else unset SGL_PATCH; fi
    # shellcheck disable=SC1091
    source .whl/bootstrap.sh > /dev/null || exit 3
    exec python3 -m runners.cli "$@"
  )
}

log "SGLang trees: unpatched and patched ($PATCH)"
for which in unpatched patched; do
  ( if [ "$which" = patched ]; then export SGL_PATCH=$PATCH; fi; source .whl/bootstrap.sh ) || exit 3
done

if has model; then
  [ -f .models/mirror-dsv3/config.json ] || sb unpatched synth-model .models/mirror-dsv3 --mode mirror
  [ -f .models/deepseek-v3-tp8-shard-40l/config.json ] ||
    sb unpatched synth-model .models/deepseek-v3-tp8-shard-40l --preset deepseek-v3-tp8-shard --layers 40
fi

if has proof; then
  log "proof: unpatched, patched and triton side by side (logs in $WORK/logs)"
  pids=()
  sb unpatched run sweeps/flashmla-draft-fix-proof.yaml --db "sqlite:///$WORK/proof-unpatched.db" \
    --label flashmla-unpatched --log-dir "$WORK/logs/unpatched" --resume --no-progress \
    > "$WORK/proof-unpatched.log" 2>&1 & pids+=($!)
  sb patched run sweeps/flashmla-draft-fix-proof.yaml --db "sqlite:///$WORK/proof-patched.db" \
    --label flashmla-patched --log-dir "$WORK/logs/patched" --resume --no-progress \
    > "$WORK/proof-patched.log" 2>&1 & pids+=($!)
  sb unpatched run sweeps/correctness-triton-control.yaml --db "sqlite:///$WORK/proof-triton.db" \
    --label triton-control --log-dir "$WORK/logs/triton" --resume --no-progress \
    > "$WORK/proof-triton.log" 2>&1 & pids+=($!)
  for i in 0 1 2; do
    rc=0; wait "${pids[$i]}" || rc=$?
    log "proof run $((i + 1))/3 exit $rc (1: the gate failed a launch, expected for the unpatched FlashMLA)"
  done
fi

if has cost; then
  runs=(unpatched patched)
  for i in 0 1; do
    which=${runs[$i]}
    if [ "$(left)" -lt 180 ]; then log "cost: $which skipped, $(left) s left before END_BY"; continue; fi
    # The window is shared: each cost run still to go gets an equal part of what is left, so a slow first run
    # cannot leave the second none (a comparison needs both).
    cut=(); [ -n "${END_BY:-}" ] && cut=(--deadline-s "$((($(left) - 30) / (2 - i)))")
    log "cost: $which ${cut[*]}"
    # One database per SGLang: --resume continues the latest run of the sweep in its database.
    sb "$which" run sweeps/flashmla-draft-fix-cost.yaml --db "sqlite:///$WORK/cost-$which.db" --label "cost-$which" \
      --log-dir "$WORK/logs/cost-$which" --resume --no-progress "${cut[@]}" > "$WORK/cost-$which.log" 2>&1 ||
      log "cost $which exit $?"
  done
fi

if has report; then
  for db in proof-unpatched proof-patched proof-triton; do
    [ -f "$WORK/$db.db" ] || continue
    log "gate: $db"
    sb unpatched gate latest --db "sqlite:///$WORK/$db.db" || true
  done
  if [ -f "$WORK/cost-unpatched.db" ] && [ -f "$WORK/cost-patched.db" ]; then
    rm -f "$WORK/cost.db"
    for which in unpatched patched; do
      sb unpatched import "$WORK/cost-$which.db" --db "sqlite:///$WORK/cost.db" > /dev/null || true
    done
    sb unpatched runs --db "sqlite:///$WORK/cost.db" || true
    sb unpatched compare latest~1 latest --db "sqlite:///$WORK/cost.db" || true
  fi
fi
log "done: $WORK"
