"""Write a synthetic DeepSeek-V3 + MTP checkpoint that sglang serves with `--attention-backend flashmla`.

* `agree`: every block's output projection is zero and `lm_head = embed[perm^-1]`, so target and MTP layer
  both compute next(x) = perm[x]: greedy acceptance is exactly steps + 1 (shared/gpu/README.md).
* `random`: plain N(0, 0.02) init with an independent lm_head.
* `mirror` (`synthetic.model.mirror`): attention decides every token, so wrong attention shows.

Each tensor has its own generator seeded from (seed, name): on `device="cpu"` the file is the same anywhere.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from synthetic.model import mirror
from synthetic.model.layout import (
    BOS_TOKEN_ID,
    EOS_TOKEN_ID,
    MODES,
    ROPE_THETA,
    Init,
    Mode,
    SynthConfigError,
    SynthSizes,
    TensorSpec,
    hf_config,
    tensor_layout,
)

if TYPE_CHECKING:
    import torch

# Files this builder owns in an output directory; `force` replaces exactly these.
CONFIG_FILE = "config.json"
GENERATION_CONFIG_FILE = "generation_config.json"
WEIGHTS_FILE = "model.safetensors"
PERM_FILE = "perm.json"
MIRROR_FILE = "mirror_perms.json"
MANIFEST_FILE = "specbench_synth.json"
OWNED_FILES = (CONFIG_FILE, GENERATION_CONFIG_FILE, WEIGHTS_FILE, PERM_FILE, MIRROR_FILE, MANIFEST_FILE)

BUILDER_VERSION = 1  # bump when the same arguments would produce different bytes
INIT_STD = 0.02


class OutputDirError(ValueError):
    """The output directory holds files that would be overwritten or loaded next to the checkpoint."""


def check_output_dir(out_dir: Path, force: bool) -> None:
    """Refuse a non-empty directory unless `force`; never accept foreign weights sglang would also load."""
    if out_dir.exists() and not out_dir.is_dir():
        raise OutputDirError(f"{out_dir} exists and is not a directory")
    if not out_dir.exists():
        return
    present = sorted(p.name for p in out_dir.iterdir())
    if not present:
        return
    if not force:
        listing = ", ".join(present[:5]) + (", ..." if len(present) > 5 else "")
        raise OutputDirError(f"{out_dir} is not empty ({listing}); pass force=True (--force) to overwrite")
    foreign = [n for n in present if n not in OWNED_FILES and (n.endswith(".safetensors") or "index" in n)]
    if foreign:
        # sglang loads every *.safetensors (or follows an index), so stale shards would mix into the model.
        raise OutputDirError(f"{out_dir} holds weights this builder did not write: {', '.join(foreign)}")


def _tensor_seed(seed: int, name: str) -> int:
    digest = hashlib.sha256(f"specbench-synth:{seed}:{name}".encode()).digest()
    return int.from_bytes(digest[:8], "little") & ((1 << 63) - 1)


def _normal(shape: tuple[int, ...], std: float, seed: int, name: str, device: str) -> torch.Tensor:
    import torch

    gen = torch.Generator(device=device).manual_seed(_tensor_seed(seed, name))
    return torch.randn(shape, generator=gen, device=device, dtype=torch.float32).mul_(std)


def make_perm(vocab: int, seed: int, name: str = "perm") -> list[int]:
    """A random bigram permutation with eos fixed, so no trajectory reaches eos (`name` picks the stream)."""
    import torch

    gen = torch.Generator(device="cpu").manual_seed(_tensor_seed(seed, name))
    others = [t for t in range(vocab) if t != EOS_TOKEN_ID]
    shuffled = torch.randperm(len(others), generator=gen).tolist()
    perm = [0] * vocab
    perm[EOS_TOKEN_ID] = EOS_TOKEN_ID
    for src, dst_index in zip(others, shuffled, strict=True):
        perm[src] = others[dst_index]
    return perm


def _check(sizes: SynthSizes, mode: str, noise: float, device: str) -> None:
    if mode not in MODES:
        raise SynthConfigError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    if not noise >= 0:  # also refuses NaN
        raise SynthConfigError(f"noise must be >= 0, got {noise}")
    if noise and mode != "agree":
        raise SynthConfigError(f"noise only applies to agree mode, not {mode}")
    import torch

    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise SynthConfigError(f"device {device!r} is not a torch device: {exc}") from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise SynthConfigError(f"device {device!r}: torch sees no CUDA GPU here (use the default, cpu)")
    sizes.validate()
    if mode == "mirror" and (problems := mirror.check_sizes(sizes)):
        raise SynthConfigError("; ".join(problems))


def mirror_maps(vocab: int, seed: int) -> tuple[list[int], list[int]]:
    """(P, Q) of a mirror checkpoint: without attention next = P[current]; with it next = Q[previous]."""
    return make_perm(vocab, seed, "mirror-self"), make_perm(vocab, seed, "mirror-previous")


def make_tensors(
    sizes: SynthSizes,
    mode: Mode,
    seed: int,
    noise: float = 0.0,
    device: str = "cpu",
) -> tuple[dict[str, torch.Tensor], list[int] | None]:
    """All tensors of the checkpoint (on CPU, ready to save) and the bigram permutation (agree mode only)."""
    import torch

    _check(sizes, mode, noise, device)
    layout = tensor_layout(sizes)
    perm = make_perm(sizes.vocab, seed) if mode == "agree" else None

    def draw(spec: TensorSpec) -> torch.Tensor:
        if spec.init is Init.NORM:
            return torch.ones(spec.shape, dtype=torch.float32, device=device)
        if spec.init is Init.ROUTER_BIAS:
            return torch.zeros(spec.shape, dtype=torch.float32, device=device)
        if mode == "random" or spec.init is Init.LINEAR:
            return _normal(spec.shape, INIT_STD, seed, spec.name, device)
        if spec.init is Init.EMBED:
            # Unit variance, not scaled down: the correct logit is ~hidden, the others ~sqrt(hidden).
            return _normal(spec.shape, 1.0, seed, spec.name, device)
        if spec.init is Init.SILENCED:
            if noise:
                return _normal(spec.shape, noise, seed, spec.name, device)
            return torch.zeros(spec.shape, dtype=torch.float32, device=device)
        if spec.init is Init.EH_PROJ:
            h = sizes.hidden
            w = torch.zeros(spec.shape, dtype=torch.float32, device=device)
            w[:, :h] = torch.eye(h, dtype=torch.float32, device=device)  # embedding half first
            return w
        raise AssertionError(f"unhandled init {spec.init} for {spec.name}")  # LM_HEAD is derived below

    tensors: dict[str, torch.Tensor] = {}
    for spec in layout:
        if spec.init is Init.LM_HEAD and mode != "random":
            continue
        dtype = torch.bfloat16 if spec.dtype == "bfloat16" else torch.float32
        tensors[spec.name] = draw(spec).to(dtype).cpu().contiguous()
    if perm is not None:
        # Row y is the (already bf16-rounded) embedding of perm^-1(y): logit[perm[x]] = |embed[x]|^2 exactly.
        inverse = torch.empty(sizes.vocab, dtype=torch.long)
        inverse[torch.tensor(perm, dtype=torch.long)] = torch.arange(sizes.vocab, dtype=torch.long)
        tensors["lm_head.weight"] = tensors["model.embed_tokens.weight"][inverse].contiguous()
    if mode == "mirror":
        # Drawn on the CPU whatever `device` says: the maps and codes are small, and the bytes stay portable.
        gen = torch.Generator(device="cpu").manual_seed(_tensor_seed(seed, "mirror-codes"))
        codes = torch.randn((sizes.vocab, mirror.code_dims(sizes)), generator=gen, dtype=torch.float32)
        codes = codes / codes.norm(dim=1, keepdim=True)
        mirror.apply(tensors, sizes, mirror_maps(sizes.vocab, seed), codes, rope_theta=ROPE_THETA)
    return tensors, perm


def write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def _json_bytes(obj: Any) -> bytes:
    return (json.dumps(obj, indent=2, sort_keys=False) + "\n").encode()


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 22), b""):
            h.update(chunk)
    return h.hexdigest()


def build_checkpoint(
    out_dir: str | os.PathLike[str],
    mode: Mode = "agree",
    hidden: int = 1024,
    layers: int = 2,
    seed: int = 0,
    vocab: int = 32000,
    experts: int = 8,
    heads: int = 16,
    *,
    experts_per_tok: int = 2,
    intermediate: int = 2048,
    moe_intermediate: int = 256,
    q_lora_rank: int = 512,
    first_k_dense: int = 1,
    max_position_embeddings: int = 4096,
    noise: float = 0.0,
    device: str = "cpu",
    force: bool = False,
) -> Path:
    """Write the checkpoint into `out_dir` and return its path; `device` "cuda" draws faster, other bytes."""
    from safetensors.torch import save_file

    sizes = SynthSizes(
        hidden=hidden,
        layers=layers,
        vocab=vocab,
        experts=experts,
        heads=heads,
        experts_per_tok=experts_per_tok,
        intermediate=intermediate,
        moe_intermediate=moe_intermediate,
        q_lora_rank=q_lora_rank,
        first_k_dense=first_k_dense,
        max_position_embeddings=max_position_embeddings,
    )
    _check(sizes, mode, noise, device)
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise SynthConfigError(f"seed must be a non-negative integer, got {seed!r}")
    out = Path(out_dir)
    check_output_dir(out, force)
    tensors, perm = make_tensors(sizes, mode, seed, noise=noise, device=device)

    out.mkdir(parents=True, exist_ok=True)
    for stale in OWNED_FILES:  # no agree-mode perm.json may stay next to a forced rebuild's weights
        (out / stale).unlink(missing_ok=True)
    config = hf_config(sizes)
    if mode == "mirror":
        # The previous-token head assumes GPT-J rope pairs: said so no loader guesses otherwise.
        config["rope_interleave"] = True
    write_atomic(out / CONFIG_FILE, _json_bytes(config))
    write_atomic(
        out / GENERATION_CONFIG_FILE,
        _json_bytes({"bos_token_id": BOS_TOKEN_ID, "eos_token_id": EOS_TOKEN_ID}),
    )
    tmp_weights = out / (WEIGHTS_FILE + ".tmp")
    save_file(tensors, str(tmp_weights), metadata={"format": "pt"})
    os.replace(tmp_weights, out / WEIGHTS_FILE)
    if perm is not None:
        write_atomic(out / PERM_FILE, (json.dumps(perm, separators=(",", ":")) + "\n").encode())
    if mode == "mirror":
        p_map, q_map = mirror_maps(sizes.vocab, seed)
        maps = {"next_of_current": p_map, "next_of_previous": q_map}
        write_atomic(out / MIRROR_FILE, (json.dumps(maps, separators=(",", ":")) + "\n").encode())

    manifest = {
        "builder": "specbench.bench.synth",
        "builder_version": BUILDER_VERSION,
        "mode": mode,
        "seed": seed,
        "noise": noise,
        "rng_device": str(device).split(":")[0],
        "sizes": dataclasses.asdict(sizes),
        "num_tensors": len(tensors),
        "num_params": sum(t.numel() for t in tensors.values()),
        "weights_bytes": (out / WEIGHTS_FILE).stat().st_size,
        "sha256": {n: file_sha256(out / n) for n in OWNED_FILES if n != MANIFEST_FILE and (out / n).exists()},
        "expect": _EXPECT[mode],
    }
    write_atomic(out / MANIFEST_FILE, _json_bytes(manifest))
    return out


_EXPECT: dict[str, dict[str, str]] = {
    "agree": {"next_token": "perm[last token]", "greedy_accept_length": "speculative_num_steps + 1"},
    "mirror": {
        "next_token": "next_of_previous[token before the last] (mirror_perms.json)",
        "greedy_accept_length": "speculative_num_steps + 1",
    },
    "random": {"next_token": "unknown", "greedy_accept_length": "unknown"},
}


def is_synthetic_checkpoint(model_dir: str | os.PathLike[str]) -> bool:
    """A directory this builder wrote (with weights): the pure-torch reference can check what it serves."""
    d = Path(model_dir)
    return (d / MANIFEST_FILE).is_file() and (d / WEIGHTS_FILE).is_file()


def read_mirror_maps(model_dir: str | os.PathLike[str]) -> tuple[list[int], list[int]]:
    maps = json.loads((Path(model_dir) / MIRROR_FILE).read_text())
    return [int(x) for x in maps["next_of_current"]], [int(x) for x in maps["next_of_previous"]]


def read_manifest(model_dir: str | os.PathLike[str]) -> dict[str, Any]:
    return dict(json.loads((Path(model_dir) / MANIFEST_FILE).read_text()))


def read_perm(model_dir: str | os.PathLike[str]) -> list[int]:
    return [int(x) for x in json.loads((Path(model_dir) / PERM_FILE).read_text())]


def expected_continuation(perm: list[int], last_token: int, n: int) -> list[int]:
    """The `n` greedy tokens an agree-mode checkpoint produces after a prompt ending in `last_token`."""
    out: list[int] = []
    tok = last_token
    for _ in range(n):
        tok = perm[tok]
        out.append(tok)
    return out
