"""`specbench crosscheck`: specbench's client and SGLang's bench_serving on one live server, A B B A."""

import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from analysis.render import magnitude
from bench.crosscheck import (
    BENCH_SERVING,
    COMPARED,
    SPECBENCH,
    Comparison,
    CrossCheck,
    CrossCheckConfig,
    CrossCheckError,
    tokenizer_json,
)
from runners.common import err_console, failing
from runners.exit_codes import ExitCode
from runners.terminal import guard


def _batch_sizes(text: str) -> list[int]:
    try:
        sizes = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise typer.BadParameter(f"expected comma-separated integers, got {text!r}") from None
    if not sizes or any(s < 1 for s in sizes):
        raise typer.BadParameter("batch sizes must be positive integers, e.g. 8,32")
    return sizes


def crosscheck(
    url: Annotated[str, typer.Option(help="Base URL of the running SGLang server (or the stand-in).")],
    tokenizer: Annotated[
        Path,
        typer.Option(
            help="Directory (or tokenizer.json) of the server's tokenizer; bench_serving loads it too."
        ),
    ],
    batch_sizes: Annotated[
        str, typer.Option("--batch-sizes", help="Comma-separated concurrencies, e.g. 8,32.")
    ] = "8,32",
    input_len: Annotated[
        int, typer.Option(min=1, max=1_000_000, help="Prompt tokens per request, both clients.")
    ] = 256,
    output_len: Annotated[
        int, typer.Option(min=2, max=1_000_000, help="Output tokens per request (ignore_eos).")
    ] = 256,
    min_window_s: Annotated[
        float,
        typer.Option(
            min=0.0, max=3600.0, help="Each window sends enough requests to last at least this long."
        ),
    ] = 10.0,
    rounds: Annotated[int, typer.Option(min=1, max=1000, help="A B B A rounds per batch size.")] = 1,
    python: Annotated[
        str, typer.Option(help="Interpreter with sglang installed; runs `-m sglang.bench_serving`.")
    ] = sys.executable,
    out_dir: Annotated[
        Path, typer.Option(help="Where bench_serving's JSONL, logs and crosscheck.json go.")
    ] = Path("crosscheck-out"),
    seed: Annotated[int, typer.Option(min=0, max=2**32 - 1, help="Seed for prompts on both sides.")] = 1,
    max_diff: Annotated[
        float | None,
        typer.Option(
            min=0.0,
            max=100.0,
            help="Exit 1 when output throughput or mean TPOT differ by more than this fraction (e.g. 0.02).",
        ),
    ] = None,
) -> None:
    """Measure one server with specbench and SGLang's bench_serving, interleaved, and print both sides."""
    sizes = _batch_sizes(batch_sizes)
    with failing(CrossCheckError):
        tokenizer_json(str(tokenizer))
    cfg = CrossCheckConfig(
        base_url=url,
        tokenizer=str(tokenizer),
        batch_sizes=sizes,
        input_len=input_len,
        output_len=output_len,
        min_window_s=min_window_s,
        rounds=rounds,
        python=python,
        out_dir=out_dir,
        seed=seed,
    )
    console = guard(Console(soft_wrap=True))
    with failing(CrossCheckError, ConnectionError):
        results = CrossCheck(
            cfg, progress=lambda line: console.print(line, markup=False, highlight=False)
        ).run()
    console.print(summary_table(results))
    console.print(f"details: {out_dir / 'crosscheck.json'}", markup=False)
    if max_diff is not None:
        worst = worst_diff(results)
        if worst is not None and worst > max_diff:
            err_console.print(f"disagreement {worst:.1%} exceeds --max-diff {max_diff:.1%}", markup=False)
            raise typer.Exit(ExitCode.FINDING)


def worst_diff(results: list[Comparison]) -> float | None:
    diffs = [
        abs(r - 1.0)
        for c in results
        for key in ("output_throughput", "tpot_mean_ms")
        if (r := c.ratio(key)) is not None
    ]
    return max(diffs) if diffs else None


def summary_table(results: list[Comparison]) -> Table:
    table = Table(title="specbench vs bench_serving (mean over each side's windows)", show_edge=False)
    for col in ("bs", "metric", SPECBENCH, BENCH_SERVING, "ratio", "paired 95% CI"):
        table.add_column(col, justify="left" if col == "metric" else "right")
    for c in results:
        for label, key in COMPARED:
            a, b, r = c.mean(SPECBENCH, key), c.mean(BENCH_SERVING, key), c.ratio(key)
            ci = c.ratio_interval(key)
            interval = "-" if ci is None or ci.low is None else f"[{ci.low:.3f}, {ci.high:.3f}] n={ci.n}"
            table.add_row(
                str(c.batch_size),
                label,
                magnitude(a, "-"),
                magnitude(b, "-"),
                "-" if r is None else f"{r:.3f}",
                interval,
            )
        cpu_a, cpu_b = c.mean(SPECBENCH, "client_cpu_s"), c.mean(BENCH_SERVING, "client_cpu_s")
        if cpu_a is not None and cpu_b is not None:
            table.add_row(
                str(c.batch_size), "client CPU s/window", f"{cpu_a:.1f}", f"{cpu_b:.1f} (incl. start)", "", ""
            )
        tokens = [
            (w.client, w.total_input_tokens, w.server_prompt_tokens)
            for w in c.windows
            if w.server_prompt_tokens
        ]
        for client, reported, counted in tokens[:2]:
            table.add_row(
                str(c.batch_size),
                f"input tokens ({client}: reported / server)",
                "",
                "",
                f"{reported} / {counted}",
                "",
            )
    return table
