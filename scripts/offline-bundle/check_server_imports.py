"""check_server_imports.py - after `source .whl/<release>/bootstrap.sh`, import every module on SGLang's LLM-server
path that a FlashMLA + EAGLE/NextN server loads, and say what is missing. Needs no model; takes ~30-60 s.

    python3 scripts/offline-bundle/check_server_imports.py            exit 1 when a module fails to import
    python3 scripts/offline-bundle/check_server_imports.py --origins  also list which third-party modules the
                                                                       host provides (the rest came from the bundle)

The list follows `python -m sglang.launch_server`: the HTTP server and engine, the scheduler, tokenizer and
detokenizer managers, the model runner and CUDA graphs, the DeepSeek V2/V3 and NextN models, the FlashMLA backend
(and the FlashInfer/Triton backends SGLang may pick for draft extend), the EAGLE v1 (0.5.12 only) and v2 workers,
the fused-MoE Triton kernels, the loader and the sampler. A module a release does not have is skipped.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
import time
import traceback

SERVER_PATH = (
    "sglang.launch_server",
    "sglang.srt.entrypoints.http_server",
    "sglang.srt.entrypoints.engine",
    "sglang.srt.managers.scheduler",
    "sglang.srt.managers.tokenizer_manager",
    "sglang.srt.managers.detokenizer_manager",
    "sglang.srt.managers.data_parallel_controller",
    "sglang.srt.managers.tp_worker",
    "sglang.srt.model_executor.model_runner",
    "sglang.srt.model_executor.cuda_graph_runner",
    "sglang.srt.model_loader.loader",
    "sglang.srt.models.registry",
    "sglang.srt.models.deepseek_v2",
    "sglang.srt.models.deepseek_nextn",
    "sglang.srt.layers.attention.attention_registry",
    "sglang.srt.layers.attention.flashmla_backend",
    "sglang.srt.layers.attention.flashinfer_mla_backend",
    "sglang.srt.layers.attention.flashinfer_backend",
    "sglang.srt.layers.attention.triton_backend",
    "sglang.srt.layers.moe.fused_moe_triton.layer",
    "sglang.srt.layers.moe.moe_runner.triton",
    "sglang.srt.layers.quantization.fp8",
    "sglang.srt.layers.sampler",
    "sglang.srt.speculative.spec_registry",
    "sglang.srt.speculative.eagle_worker",
    "sglang.srt.speculative.eagle_worker_v2",
    "sglang.srt.speculative.eagle_draft_cuda_graph_runner",
    "sglang.srt.speculative.eagle_draft_extend_cuda_graph_runner",
    "sgl_kernel.flash_mla",
    "flashinfer.sampling",
)


def _exists(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:
        return False


def main(argv: list[str]) -> int:
    failed: list[tuple[str, str]] = []
    skipped: list[str] = []
    t0 = time.monotonic()
    for name in SERVER_PATH:
        if not _exists(name):
            skipped.append(name)
            continue
        try:
            importlib.import_module(name)
        except Exception as e:  # report every failure, not just the first
            missing = getattr(e, "name", None) if isinstance(e, ModuleNotFoundError) else None
            failed.append((name, f"missing module {missing}" if missing else f"{type(e).__name__}: {e}"))
            if os.environ.get("CHECK_IMPORTS_TRACEBACK"):
                traceback.print_exc()
    took = time.monotonic() - t0
    import sglang

    ok = len(SERVER_PATH) - len(skipped) - len(failed)
    print(
        f"sglang {getattr(sglang, '__version__', '?')}: {ok} server modules imported in {took:.0f}s", end=""
    )
    print(
        f", {len(skipped)} absent from this release ({', '.join(s.rsplit('.', 1)[1] for s in skipped)})"
        if skipped
        else ""
    )
    for name, why in failed:
        print(f"FAILED {name}: {why}")
    if "--origins" in argv:
        site = os.environ.get("PYTHONPATH", "").split(":")[0]
        host: dict[str, str] = {}
        for mod in list(sys.modules.values()):
            top = (getattr(mod, "__name__", "") or "").split(".")[0]
            path = getattr(mod, "__file__", None) or ""
            if not top or top in sys.stdlib_module_names or top in host or not path or top.startswith("_"):
                continue
            if site and not path.startswith(site + os.sep) and "site-packages" in path:
                host[top] = path.split("site-packages")[0] + "site-packages"
        print("from the host:", " ".join(sorted(host, key=str.lower)))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
