#!/usr/bin/env bash
# gpu_smoke.sh: a smoke sweep on a Hopper GPU host, end to end (launch, verify the spec mode, measure, store).
#
#   bash scripts/gpu_smoke.sh [DB_URL]        from the project root, after the install of docs/guide/gpu-hosts.md
#
# 1. checks the host: a visible NVIDIA GPU, and sglang, sgl-kernel, flashinfer and CUDA torch importable;
# 2. builds the tiny synthetic DeepSeek-V3 + MTP checkpoint (`specbench synth-model --mode agree`: the draft
#    agrees with the target, so greedy acceptance is exactly steps + 1) unless it is already there;
# 3. runs sweeps/h200-smoke.yaml against it (baseline + EAGLE steps 1-3 in v1 and v2, batch sizes 1-32):
#    7 server launches, about 10-15 minutes on an H200, most of it the first (cold) start, see docs/guide/gpu-hosts.md;
# 4. prints the stored run as a Markdown table.
# Interrupted? Run it again: the sweep resumes and skips what is stored.
#
# Environment: SPECBENCH (the command, default `specbench`; `python3 -m runners.cli` after `source .whl/<release>/bootstrap.sh`), SMOKE_DIR (checkpoint, logs and database;
# default ./.smoke), SMOKE_SWEEP (default sweeps/h200-smoke.yaml), SMOKE_GPUS (e.g. 0; default all).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
read -r -a SB <<< "${SPECBENCH:-specbench}"  # e.g. SPECBENCH="python3 -m runners.cli" on an offline host
DIR=${SMOKE_DIR:-$ROOT/.smoke}
SWEEP=${SMOKE_SWEEP:-sweeps/h200-smoke.yaml}
DB=${1:-sqlite:///$DIR/smoke.db}
MODEL=$DIR/tiny_dsv3_agree
PY=$(command -v python3)
mkdir -p "$DIR"
say() { echo "[gpu_smoke] $*"; }

# ---- 1. the host
command -v nvidia-smi > /dev/null || { say "no nvidia-smi: this host has no NVIDIA driver"; exit 1; }
say "GPU: $(nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tr '\n' ';')"
"$PY" - << 'PY' || { say "the GPU stack is incomplete: see docs/guide/gpu-hosts.md"; exit 1; }
import sys
from importlib.metadata import PackageNotFoundError, version

def v(*names):
    for n in names:
        try:
            return version(n)
        except PackageNotFoundError:
            pass
    return None

found = {"sglang": v("sglang"), "sgl-kernel": v("sglang-kernel", "sgl-kernel"), "flashinfer": v("flashinfer-python")}
import torch

found["torch"] = torch.__version__
print("[gpu_smoke] " + ", ".join(f"{k} {val or 'MISSING'}" for k, val in found.items()))
if not torch.cuda.is_available():
    sys.exit("[gpu_smoke] torch sees no CUDA device")
cap = torch.cuda.get_device_capability(0)
if cap != (9, 0):
    print(f"[gpu_smoke] warning: compute capability {cap}; FlashMLA targets Hopper (9, 0)")
sys.exit(0 if all(found.values()) else 1)
PY

# ---- 2. the checkpoint (byte-identical for the same seed and sizes, so reruns reuse it)
if [ -f "$MODEL/specbench_synth.json" ]; then
  say "checkpoint: $MODEL (present)"
else
  "${SB[@]}" synth-model "$MODEL" --mode agree --seed 0
fi

# ---- 3. the sweep, pointed at this checkpoint
SWEEP_HERE=$DIR/$(basename "$SWEEP")
"$PY" - "$SWEEP" "$SWEEP_HERE" "$MODEL" << 'PY'
import sys

import yaml

doc = yaml.safe_load(open(sys.argv[1]))
doc["model"] = sys.argv[3]
yaml.safe_dump(doc, open(sys.argv[2], "w"), sort_keys=False)
PY
gpus=()
[ -n "${SMOKE_GPUS:-}" ] && gpus=(--gpus "$SMOKE_GPUS")
"${SB[@]}" run "$SWEEP_HERE" --db "$DB" --resume --log-dir "$DIR/logs" "${gpus[@]}" --label smoke

# ---- 4. the result
"${SB[@]}" export --db "$DB" --format md --all-status
say "stored in $DB; server logs in $DIR/logs. Look: ${SB[*]} dashboard --db $DB"
