"""Cross-check: specbench's client and SGLang's `bench_serving` (`python -m sglang.bench_serving` of the given
interpreter, argv only) measure one live server in A B B A turns per batch size (A = specbench), so server
drift lands on both sides. Each window follows a specbench warmup wave and a cache flush; both send as many
requests at the same concurrency, input and output lengths (`--random-range-ratio 1`) and `ignore_eos`. By
design bench_serving sends and reads text, specbench token ids; its ShareGPT file is written here from the
server's tokenizer (no hub). docs/reference/bench-serving.md lists what this can and cannot expose."""

from __future__ import annotations

import asyncio
import gzip
import json
import math
import os
import random
import resource
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

import aiohttp

from bench import catalog
from bench.bench_serving_io import BenchServingFormatError, metrics_of
from bench.client import LoadClient
from bench.measure import gc_paused
from bench.metrics import compute_metrics
from bench.stats.ratio import RatioInterval, paired_ratio
from bench.sweep import WorkloadSpec
from bench.workload import build_prompts

Side = Literal["specbench", "bench_serving"]
SPECBENCH: Side = "specbench"
BENCH_SERVING: Side = "bench_serving"
ROUND: tuple[Side, ...] = (SPECBENCH, BENCH_SERVING, BENCH_SERVING, SPECBENCH)
TOKENIZER_FILE = "tokenizer.json"
# What is compared, as (label, key in WindowResult); higher-is-better does not matter for a ratio.
COMPARED = (
    ("output tok/s", "output_throughput"),
    ("TPOT mean ms", "tpot_mean_ms"),
    ("TPOT p50 ms", "tpot_p50_ms"),
    ("TTFT p50 ms", "ttft_p50_ms"),
    ("ITL mean ms", "itl_mean_ms"),
)


class CrossCheckError(RuntimeError):
    """A side could not produce a window (bench_serving failed, the server refused, ...)."""


@dataclass(frozen=True)
class CrossCheckConfig:
    base_url: str
    tokenizer: str
    batch_sizes: Sequence[int]
    input_len: int = 256
    output_len: int = 256
    min_window_s: float = 10.0
    rounds: int = 1
    python: str = "python"
    out_dir: Path = Path("crosscheck")
    seed: int = 1
    request_timeout_s: float = 600.0
    bench_serving_timeout_s: float = 1800.0


# Figures a window may lack (None or absent in its side's result).
_OPTIONAL = ("tpot_mean_ms", "tpot_p50_ms", "ttft_p50_ms", "ttft_mean_ms", "itl_mean_ms")


@dataclass
class WindowResult:
    client: Side
    batch_size: int
    position: int  # order within this batch size's sequence, 0-based
    num_prompts: int
    duration_s: float
    completed: int
    total_input_tokens: int
    total_output_tokens: int
    output_throughput: float
    tpot_mean_ms: float | None
    tpot_p50_ms: float | None
    ttft_p50_ms: float | None
    ttft_mean_ms: float | None
    itl_mean_ms: float | None
    # The server's own prompt-token counter over the window (Prometheus), when it exposes one.
    server_prompt_tokens: int | None = None
    source: str | None = None  # bench_serving's output file
    # Client CPU seconds in the window: a busier client can slow a scheduler-bound server it measures.
    client_cpu_s: float | None = None

    @classmethod
    def of(
        cls,
        client: Side,
        batch_size: int,
        position: int,
        num_prompts: int,
        figures: Mapping[str, Any],
        *,
        source: str | None = None,
        client_cpu_s: float | None = None,
    ) -> WindowResult:
        """A window from its figures by catalogue name (SampleMetrics' fields)."""
        return cls(
            client=client,
            batch_size=batch_size,
            position=position,
            num_prompts=num_prompts,
            duration_s=float(figures["duration_s"]),
            completed=int(figures["completed"]),
            total_input_tokens=int(figures["total_input_tokens"]),
            total_output_tokens=int(figures["total_output_tokens"]),
            output_throughput=float(figures["output_throughput"]),
            **{key: figures.get(key) for key in _OPTIONAL},
            source=source,
            client_cpu_s=client_cpu_s,
        )


@dataclass
class Comparison:
    batch_size: int
    num_prompts: int
    windows: list[WindowResult] = field(default_factory=list)

    def side(self, client: Side) -> list[WindowResult]:
        return [w for w in self.windows if w.client == client]

    def mean(self, client: Side, key: str) -> float | None:
        values = [getattr(w, key) for w in self.side(client)]
        values = [v for v in values if v is not None]
        return sum(values) / len(values) if values else None

    def ratio(self, key: str) -> float | None:
        """specbench / bench_serving for `key`, on the means over each side's windows."""
        a, b = self.mean(SPECBENCH, key), self.mean(BENCH_SERVING, key)
        return None if a is None or b is None or b == 0 else a / b

    def pairs(self) -> list[tuple[WindowResult, WindowResult]]:
        """(specbench, bench_serving) windows that ran next to each other: A B | B A of every round."""
        by_pos = sorted(self.windows, key=lambda w: w.position)
        out = []
        for i in range(0, len(by_pos) - 1, 2):
            first, second = by_pos[i], by_pos[i + 1]
            if {first.client, second.client} == {SPECBENCH, BENCH_SERVING}:
                out.append((first, second) if first.client == SPECBENCH else (second, first))
        return out

    def ratio_interval(self, key: str, confidence: float = 0.95) -> RatioInterval | None:
        """specbench / bench_serving for `key`, paired over neighbouring windows (>= 2 pairs)."""
        pairs = [(a, b) for a, b in self.pairs() if getattr(a, key) and getattr(b, key)]
        if len(pairs) < 2:
            return None
        return paired_ratio(
            [getattr(b, key) for _, b in pairs], [getattr(a, key) for a, _ in pairs], confidence
        )

    def to_dict(self) -> dict[str, Any]:
        intervals = {key: self.ratio_interval(key) for _, key in COMPARED}
        return {
            "batch_size": self.batch_size,
            "num_prompts": self.num_prompts,
            "windows": [asdict(w) for w in self.windows],
            "ratios": {key: self.ratio(key) for _, key in COMPARED},
            "paired_intervals": {
                key: None if ci is None else {"ratio": ci.ratio, "low": ci.low, "high": ci.high, "n": ci.n}
                for key, ci in intervals.items()
            },
        }


def order(rounds: int) -> list[Side]:
    """A B B A, `rounds` times."""
    if rounds < 1:
        raise ValueError("rounds must be >= 1")
    return list(ROUND) * rounds


def tokenizer_json(tokenizer: str) -> Path:
    p = Path(tokenizer)
    found = p if p.is_file() else p / TOKENIZER_FILE
    if not found.is_file():
        raise CrossCheckError(
            f"no {TOKENIZER_FILE} at {tokenizer}: the cross-check needs the server's tokenizer as a local "
            "directory (e.g. the checkpoint directory `specbench synth-model` wrote)"
        )
    return found


def write_sharegpt(path: Path, tokenizer: str, *, conversations: int, words: int, seed: int) -> int:
    """A ShareGPT file for `--dataset-name random`: turns of `words` random tokens; returns the vocab size."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(tokenizer_json(tokenizer)))
    vocab = tok.get_vocab_size(with_added_tokens=True)
    special = {t.content for t in tok.get_added_tokens_decoder().values() if t.special}
    special_ids = {tok.token_to_id(t) for t in special}
    rng = random.Random(seed)
    rows = []
    for _ in range(conversations):
        ids: list[int] = []
        while len(ids) < words:
            i = rng.randrange(vocab)
            if i not in special_ids:
                ids.append(i)
        human = {"from": "human", "value": tok.decode(ids, skip_special_tokens=True)}
        gpt = {"from": "gpt", "value": tok.decode(ids[:8], skip_special_tokens=True)}
        rows.append({"conversations": [human, gpt]})
    path.write_text(json.dumps(rows))
    return vocab


# WindowResult's figures, named as in the metric catalogue, which maps them to bench_serving's keys.
_REQUIRED = ("duration_s", "completed", "total_input_tokens", "total_output_tokens", "output_throughput")


def parse_bench_serving(line: dict[str, Any], *, batch_size: int, position: int, source: str) -> WindowResult:
    """One bench_serving result line as a window; its keys are read through the metric catalogue."""
    try:
        m = metrics_of(line)
    except BenchServingFormatError as e:  # a figure of the wrong type or out of range: one line, no traceback
        raise CrossCheckError(f"{source}: bench_serving's result: {e}") from None
    if missing := [catalog.get(k).bench_serving for k in _REQUIRED if k not in m]:
        raise CrossCheckError(f"{source}: bench_serving's result has no {', '.join(map(str, missing))}")
    return WindowResult.of(BENCH_SERVING, batch_size, position, int(m["completed"]), m, source=source)


def last_jsonl_line(path: Path) -> dict[str, Any]:
    lines = [ln for ln in path.read_text().splitlines() if ln.strip()]
    if not lines:
        raise CrossCheckError(f"bench_serving wrote no result to {path}")
    return json.loads(lines[-1])


PROMPT_TOKENS_METRIC = "sglang:prompt_tokens_total"


def prompt_tokens_from_metrics(text: str) -> int | None:
    """`sglang:prompt_tokens_total` summed over label sets in a Prometheus text page, or None when absent."""
    total = 0.0
    seen = False
    for raw in text.splitlines():
        name = raw.split("{", 1)[0].split(" ", 1)[0]
        if name == PROMPT_TOKENS_METRIC:
            total += float(raw.rsplit(" ", 1)[1])
            seen = True
    return int(total) if seen else None


async def metrics_page(client: LoadClient) -> str | None:
    """`/metrics` as text (asked unencoded, gzip still undone), or None (metrics off, transport trouble)."""
    try:
        async with client.session.get(
            client.base_url + "/metrics", headers={"Accept-Encoding": "identity"}
        ) as resp:
            if resp.status != 200:
                return None
            body = await resp.read()
            if resp.headers.get("Content-Encoding", "").lower() == "gzip":
                body = gzip.decompress(body)
            return body.decode("utf-8", errors="replace")
    except (aiohttp.ClientError, TimeoutError, OSError, EOFError):  # only costs this optional figure
        return None


class CrossCheck:
    """Runs the interleaved windows; `progress` gets one line per step."""

    def __init__(self, cfg: CrossCheckConfig, progress: Callable[[str], None] = print) -> None:
        self.cfg = cfg
        self.progress = progress
        self.vocab = 0
        self.dataset: Path | None = None
        self.metrics_note_written = False

    def run(self) -> list[Comparison]:
        cfg = self.cfg
        cfg.out_dir.mkdir(parents=True, exist_ok=True)
        self.dataset = cfg.out_dir / "sharegpt-synthetic.json"
        return asyncio.run(self._run())

    async def _run(self) -> list[Comparison]:
        cfg = self.cfg
        out: list[Comparison] = []
        async with LoadClient(cfg.base_url) as client:
            await client.server_info()  # fails fast with a clear error when nothing listens
            for bs in cfg.batch_sizes:
                n = await self._calibrate(client, bs)
                assert self.dataset is not None
                self.vocab = write_sharegpt(
                    self.dataset, cfg.tokenizer, conversations=max(n, 64), words=cfg.input_len, seed=cfg.seed
                )
                workload = WorkloadSpec(input_len=cfg.input_len, output_len=cfg.output_len, seed=cfg.seed)
                prompts = build_prompts(workload, n, vocab_size=self.vocab)
                comp = Comparison(batch_size=bs, num_prompts=n)
                for pos, side in enumerate(order(cfg.rounds)):
                    # One specbench warmup wave before each window: the counters then cover the window alone.
                    await client.run_closed_loop(prompts[:bs], bs, cfg.request_timeout_s)
                    before = await self._prompt_tokens(client)
                    if side == SPECBENCH:
                        w = await self._specbench_window(client, prompts, bs, pos)
                    else:
                        w = await asyncio.to_thread(self._bench_serving_window, bs, n, pos)
                    after = await self._prompt_tokens(client)
                    if before is not None and after is not None:
                        w.server_prompt_tokens = after - before
                    self.progress(
                        f"bs {bs} #{pos + 1} {side}: {w.output_throughput:,.0f} tok/s, "
                        f"TPOT {_fmt(w.tpot_mean_ms)} ms, TTFT p50 {_fmt(w.ttft_p50_ms)} ms, "
                        f"{w.duration_s:.1f} s"
                    )
                    comp.windows.append(w)
                out.append(comp)
        (cfg.out_dir / "crosscheck.json").write_text(json.dumps([c.to_dict() for c in out], indent=2))
        return out

    async def _prompt_tokens(self, client: LoadClient) -> int | None:
        page = await metrics_page(client)
        if page is None:
            return None
        tokens = prompt_tokens_from_metrics(page)
        if tokens is None and not self.metrics_note_written:
            # Metrics on but no prompt-token counter: keep the page to show the names this SGLang exposes.
            (self.cfg.out_dir / "metrics-without-prompt-tokens.txt").write_text(page)
            self.progress(
                f"/metrics has no {PROMPT_TOKENS_METRIC}; page saved to metrics-without-prompt-tokens.txt"
            )
            self.metrics_note_written = True
        return tokens

    async def _calibrate(self, client: LoadClient, bs: int) -> int:
        """One wave to warm up, two to time; sizes both sides' windows."""
        cfg = self.cfg
        if cfg.min_window_s <= 0:
            return 4 * bs
        workload = WorkloadSpec(input_len=cfg.input_len, output_len=cfg.output_len, seed=cfg.seed + 7)
        from tokenizers import Tokenizer

        vocab = Tokenizer.from_file(str(tokenizer_json(cfg.tokenizer))).get_vocab_size(with_added_tokens=True)
        prompts = build_prompts(workload, 2 * bs, vocab_size=vocab)
        await client.run_closed_loop(prompts[:bs], bs, cfg.request_timeout_s)
        records, duration = await client.run_closed_loop(prompts, bs, cfg.request_timeout_s)
        done = sum(1 for r in records if r.ok)
        if done == 0:
            raise CrossCheckError(f"calibration at batch size {bs}: every request failed")
        # Enough requests for min_window_s at the calibrated rate: whole waves, at least four of them.
        n = bs * max(4, math.ceil(done / duration * cfg.min_window_s / bs))
        self.progress(f"bs {bs}: calibrated {done / duration:.2f} req/s -> {n} requests per window")
        return n

    async def _specbench_window(
        self, client: LoadClient, prompts: list[Any], bs: int, pos: int
    ) -> WindowResult:
        cfg = self.cfg
        await client.flush_cache()  # bench_serving's --flush-cache does the same before its window
        cpu0 = time.process_time()
        with gc_paused():
            records, duration = await client.run_closed_loop(prompts, bs, cfg.request_timeout_s)
        cpu_s = time.process_time() - cpu0
        m = compute_metrics(records, duration)
        if m.completed == 0:
            raise CrossCheckError(f"specbench window at batch size {bs}: every request failed")
        return WindowResult.of(SPECBENCH, bs, pos, len(prompts), asdict(m), client_cpu_s=cpu_s)

    def _bench_serving_window(self, bs: int, n: int, pos: int) -> WindowResult:
        cfg = self.cfg
        assert self.dataset is not None
        stem = cfg.out_dir / f"bench_serving-bs{bs}-{pos + 1}"
        output_file = stem.with_suffix(".jsonl")
        output_file.unlink(missing_ok=True)
        flags: dict[str, object] = {
            "backend": "sglang",
            "base-url": cfg.base_url,
            "tokenizer": cfg.tokenizer,
            "dataset-name": "random",
            "dataset-path": self.dataset,
            "random-input-len": cfg.input_len,
            "random-output-len": cfg.output_len,
            "random-range-ratio": 1,
            "num-prompts": n,
            "max-concurrency": bs,
            "request-rate": "inf",
            "warmup-requests": 0,
            "flush-cache": None,
            "seed": cfg.seed + pos,
            "output-file": output_file,
            "disable-tqdm": None,
        }
        argv = [cfg.python, "-m", "sglang.bench_serving"]
        for name, value in flags.items():
            argv += [f"--{name}"] if value is None else [f"--{name}", str(value)]
        env = dict(os.environ)
        if Path(cfg.tokenizer).exists():
            # A local tokenizer never needs the hub; an offline GPU host must not wait on it.
            env.setdefault("HF_HUB_OFFLINE", "1")
            env.setdefault("TRANSFORMERS_OFFLINE", "1")
        log = stem.with_suffix(".log")
        started = time.perf_counter()
        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        with log.open("wb") as fh:
            try:
                proc = subprocess.run(
                    argv,
                    stdout=fh,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    env=env,
                    timeout=cfg.bench_serving_timeout_s,
                    check=False,
                )
            except FileNotFoundError as exc:
                raise CrossCheckError(f"cannot run {cfg.python}: {exc}") from exc
            except subprocess.TimeoutExpired as exc:
                raise CrossCheckError(
                    f"bench_serving ran past {cfg.bench_serving_timeout_s:.0f} s; log: {log}"
                ) from exc
        if proc.returncode != 0 or not output_file.exists():
            tail = log.read_text(errors="replace").splitlines()[-15:]
            raise CrossCheckError(
                f"bench_serving exited {proc.returncode} after {time.perf_counter() - started:.0f} s; "
                f"log: {log}\n" + "\n".join(tail)
            )
        w = parse_bench_serving(
            last_jsonl_line(output_file), batch_size=bs, position=pos, source=str(output_file)
        )
        w.num_prompts = n
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        # The whole subprocess, start-up and imports included: an upper bound on its window's share.
        w.client_cpu_s = (after.ru_utime - children.ru_utime) + (after.ru_stime - children.ru_stime)
        return w


def _fmt(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}"
