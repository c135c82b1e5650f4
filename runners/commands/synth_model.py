"""`specbench synth-model OUT_DIR`: write a synthetic DeepSeek-V3 + MTP checkpoint for GPU smoke runs."""

import time
from enum import StrEnum
from pathlib import Path
from typing import Annotated, cast

import typer
from rich.console import Console
from rich.table import Table

from runners.common import fail, failing
from runners.terminal import guard
from synthetic import model as synth
from synthetic.model.tokenizer import write_for_checkpoint as write_synthetic_tokenizer


class ModeChoice(StrEnum):
    agree = "agree"
    random = "random"
    mirror = "mirror"


class PresetChoice(StrEnum):
    deepseek_v3_slice = "deepseek-v3-slice"
    deepseek_v2_lite = "deepseek-v2-lite"
    deepseek_v3_tp8_shard = "deepseek-v3-tp8-shard"


def synth_model(
    out_dir: Annotated[
        Path, typer.Argument(help="Directory to write the checkpoint into (created if missing).")
    ],
    mode: Annotated[
        ModeChoice,
        typer.Option(
            help="agree: draft == target (accept length exactly steps+1); random: plain random init; "
            "mirror: attention picks every token and the draft mirrors it (the correctness gate's checkpoint)."
        ),
    ] = ModeChoice.agree,
    hidden: Annotated[
        int, typer.Option(min=64, max=65_536, help="Hidden size (multiple of 64, divisible by --heads).")
    ] = 1024,
    layers: Annotated[
        int | None,
        typer.Option(
            min=1,
            max=256,
            help="Decoder layers; the MTP layer is one more. Default: 2 (tiny model); a preset's published count.",
        ),
    ] = None,
    preset: Annotated[
        PresetChoice | None,
        typer.Option(
            help="Write a config-only checkpoint of a published shape (no weights; serve with "
            "server.load_format: dummy). Only --layers, --tp and --force apply."
        ),
    ] = None,
    tp: Annotated[
        int | None,
        typer.Option(
            help="deepseek-v3-tp8-shard: the tensor-parallel width whose one GPU the shard is (default 8; "
            "1 = the whole model, to serve at server.tp: 8)."
        ),
    ] = None,
    seed: Annotated[
        int,
        typer.Option(min=0, max=2**32 - 1, help="Seed; the same seed and sizes give byte-identical weights."),
    ] = 0,
    vocab: Annotated[int, typer.Option(min=8, max=2**20, help="Vocabulary size.")] = 32000,
    experts: Annotated[int, typer.Option(min=1, max=1024, help="Routed experts per MoE layer.")] = 8,
    heads: Annotated[
        int, typer.Option(min=1, max=128, help="Attention heads (MLA head dims stay DeepSeek-V3's).")
    ] = 16,
    noise: Annotated[
        float,
        typer.Option(
            min=0.0, max=1e3, help="agree mode: std of noise on the silenced projections (0 = exact zeros)."
        ),
    ] = 0.0,
    device: Annotated[
        str, typer.Option(help="Where random draws happen; 'cpu' gives the same bytes on every machine.")
    ] = "cpu",
    force: Annotated[
        bool, typer.Option("--force", help="Overwrite a previous synthetic checkpoint.")
    ] = False,
    tokenizer: Annotated[
        bool,
        typer.Option(
            "--tokenizer/--no-tokenizer",
            help="Also write a word-level tokenizer (vocab = the config's) so text-mode clients work offline.",
        ),
    ] = True,
) -> None:
    """Write a synthetic DeepSeek-V3 + MTP checkpoint (FlashMLA dims) that sglang serves with EAGLE/NextN."""
    console = guard(Console())
    if tp is not None and preset is None:
        fail("--tp applies to --preset deepseek-v3-tp8-shard only")
    if preset is not None:
        _write_preset(console, out_dir, preset.value, layers, tp, force)
        if tokenizer:
            names = ", ".join(f.name for f in write_synthetic_tokenizer(out_dir))
            console.print(
                f"  tokenizer: {names} (word-level, the config's vocab; loads offline)", markup=False
            )
        return
    started = time.perf_counter()
    with failing(synth.SynthConfigError, synth.OutputDirError):
        path = synth.build_checkpoint(
            out_dir,
            mode=cast(synth.Mode, mode.value),  # ModeChoice's values are exactly synth.MODES
            hidden=hidden,
            layers=2 if layers is None else layers,
            seed=seed,
            vocab=vocab,
            experts=experts,
            heads=heads,
            noise=noise,
            device=device,
            force=force,
        )
    tokenizer_files = write_synthetic_tokenizer(path) if tokenizer else []
    manifest = synth.read_manifest(path)
    elapsed = time.perf_counter() - started

    files = Table(title=f"synthetic checkpoint in {path}", show_edge=False)
    files.add_column("file")
    files.add_column("bytes", justify="right")
    files.add_column("sha256", overflow="fold")
    for name in synth.OWNED_FILES:
        f = path / name
        if f.exists():
            files.add_row(name, f"{f.stat().st_size:,}", manifest["sha256"].get(name, "")[:16])
    console.print(files)
    sizes = manifest["sizes"]
    console.print(
        f"mode [bold]{manifest['mode']}[/], seed {manifest['seed']}, hidden {sizes['hidden']}, "
        f"layers {sizes['layers']} + 1 MTP, vocab {sizes['vocab']}, experts {sizes['experts']}, "
        f"heads {sizes['heads']}: {manifest['num_tensors']} tensors, "
        f"{manifest['num_params'] / 1e6:.1f} M params in {elapsed:.1f} s"
    )
    if tokenizer_files:
        names = ", ".join(f.name for f in tokenizer_files)
        console.print(f"tokenizer: {names} (word-level, vocab {sizes['vocab']}; loads offline)", markup=False)
    if manifest["mode"] == "agree":
        console.print(
            "expect: next(x) = perm[x] (perm.json); greedy accept length = speculative_num_steps + 1",
            markup=False,
        )
    elif manifest["mode"] == "mirror":
        console.print(
            "expect: next = next_of_previous[token before the last] (mirror_perms.json); greedy accept length "
            "= speculative_num_steps + 1; a wrong attention changes tokens (target) or acceptance (draft)",
            markup=False,
        )


def _write_preset(
    console: Console, out_dir: Path, preset: str, layers: int | None, tp: int | None, force: bool
) -> None:
    with failing(synth.SynthConfigError, synth.OutputDirError):
        path = synth.build_preset(out_dir, preset, layers, tp=tp, force=force)
    cfg = synth.preset_config(preset, layers, tp)
    n, k = cfg["num_hidden_layers"], cfg["first_k_dense_replace"]
    mtp = cfg.get("num_nextn_predict_layers", 0)
    head = (
        f"{preset}: config-only checkpoint in {path}\n"
        f"  {n} layers ({k} dense + {n - k} MoE){f' + {mtp} MTP (NextN) layer' if mtp else ''}, "
        f"hidden {cfg['hidden_size']}, {cfg['n_routed_experts']} routed experts, vocab {cfg['vocab_size']}\n"
    )
    if "quantization_config" in cfg:
        manifest = synth.read_manifest(path)
        sizes = manifest["weight_bytes"]
        head = (
            f"{preset}: config-only checkpoint in {path}\n  {manifest['what']}\n"
            f"  {n} layers ({k} dense + {n - k} MoE){f' + {mtp} NextN layer' if mtp else ''}: "
            f"{cfg['num_attention_heads']} heads, intermediate {cfg['intermediate_size']}, "
            f"{cfg['n_routed_experts']} experts of width {cfg['moe_intermediate_size']}, top-"
            f"{cfg['num_experts_per_tok']}, vocab {cfg['vocab_size']}\n"
            f"  FP8 weights incl. block scales: {sizes['target_layers'] / 1e9:.1f} GB target layers + "
            f"{sizes['nextn_layer'] / 1e9:.2f} GB NextN layer; embedding + LM head (bf16) "
            f"{sizes['embed_and_head'] / 1e9:.2f} GB; total {sum(sizes.values()) / 1e9:.1f} GB "
            f"({sum(sizes.values()) / 2**30:.1f} GiB)\n"
        )
        sizes_line = ""
    else:
        params = synth.approx_params(cfg)
        sizes_line = f"  bf16 weights SGLang will allocate: ~{params['target'] * 2 / 2**30:.1f} GiB" + (
            f" + ~{params['mtp'] * 2 / 2**30:.1f} GiB for the NextN layer\n" if mtp else "\n"
        )
    console.print(
        head
        + sizes_line
        + "  serve with `server.load_format: dummy` (--load-format dummy); "
        + ("the NextN draft loads from the same path (leave draft_model unset)" if mtp else "no MTP layer"),
        markup=False,
        highlight=False,
        soft_wrap=True,  # sizes and paths stay on their lines (logs are grepped)
    )


def register(app: typer.Typer) -> None:
    app.command("synth-model")(synth_model)
