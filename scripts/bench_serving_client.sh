#!/usr/bin/env bash
# SGLang's bench_serving client on a host without a GPU (a laptop, CI), in its own virtual environment.
#
#   bash scripts/bench_serving_client.sh [VENV]        (default: .venv-bench-serving)
#   VENV/bin/python -m sglang.bench_serving --help
#   specbench crosscheck --python VENV/bin/python ...
#
# Why not `pip install sglang`: sglang 0.5.13.post1 requires the whole GPU server (torch==2.11.0 with CUDA 13,
# flashinfer, sglang-kernel, deep-gemm, tilelang, ...: ~195 packages), and its torch pin conflicts with any other
# torch in the same environment. bench_serving itself needs few of them, but `import sglang` loads
# sglang/srt/utils/common.py, which imports torch, triton and torchvision at module level; PyPI has no CPU
# build of torchvision, so the CUDA build of torch 2.11.0 (which runs on a CPU host) comes along. On a GPU
# host with sglang installed none of this is needed: use that interpreter.
set -euo pipefail
SGLANG_VERSION=0.5.13.post1
VENV=${1:-.venv-bench-serving}
PY=${PYTHON:-python3}
if [ -x "$VENV/bin/python" ] && "$VENV/bin/python" -c "import sglang.bench_serving" >/dev/null 2>&1; then
  echo "bench_serving client ready: $VENV/bin/python"
  exit 0
fi
"$PY" -m venv "$VENV"
pip=("$VENV/bin/python" -m pip install -q --disable-pip-version-check)
# sglang itself without its dependency list, then what `import sglang.bench_serving` needs, at sglang's pins.
"${pip[@]}" --no-deps "sglang==$SGLANG_VERSION"
"${pip[@]}" "torch==2.11.0" "torchvision==0.26.0" "transformers==5.8.1" "openai==2.6.1" \
  aiohttp numpy requests tqdm orjson packaging pillow psutil pybase64 pyzmq starlette ipython \
  partial_json_parser sentencepiece datasets
"$VENV/bin/python" -c "import sglang.bench_serving" >/dev/null 2>&1 || {
  echo "error: $VENV/bin/python cannot import sglang.bench_serving" >&2
  exit 1
}
echo "bench_serving client ready: $VENV/bin/python"
