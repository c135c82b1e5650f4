"""Prompts for one point: synthetic token ids or lines of a JSONL file. `random` prompts are token ids
(exactly `input_len` tokens, no BOS; contract §6.4), each opening with a sequence no other prompt opens with,
so the radix cache never serves one's prefix to another (§6.6). `jsonl` lines are `{"input_ids": [...]}` or
`{"prompt": "..."}` with optional `output_len` and, for text, `prompt_len` (bench_serving's dataset count; 0 =
unknown: metrics use the server's `prompt_tokens`)."""

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from bench.bench_serving_io import _shown
from bench.files import FileReadError, read_regular_file, regular_file_problem
from bench.model_config import DEFAULT_VOCAB_SIZE
from bench.sweep import MAX_TOKENS, WorkloadSpec

FIRST_RANDOM_ID = 2  # ids 0 and 1 are bos/eos in most vocabularies; a random prompt never contains them
# Problems listed at once for a bad file before giving up; enough to spot a pattern, not a wall of text.
_MAX_REPORTED_PROBLEMS = 10
MAX_WORKLOAD_BYTES = 1 << 30  # read whole, so at most this much (ShareGPT as JSONL is ~600 MB)


class WorkloadError(ValueError):
    """A dataset that cannot produce prompts; the message names the file and line."""


@dataclass(frozen=True, slots=True)
class Prompt:
    """One request's input. Exactly one of `input_ids` and `text` is set."""

    prompt_len: int
    output_len: int
    input_ids: list[int] | None = None
    text: str | None = None

    def __post_init__(self) -> None:
        if (self.input_ids is None) == (self.text is None):
            raise ValueError("a Prompt has exactly one of input_ids and text")


def build_prompts(workload: WorkloadSpec, n: int, vocab_size: int = DEFAULT_VOCAB_SIZE) -> list[Prompt]:
    """`n` prompts for `workload`, the same everywhere for one spec and vocabulary (`prompt_vocab`)."""
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    if workload.dataset == "random":
        return _random_prompts(workload, n, vocab_size)
    if not workload.path:
        raise WorkloadError("dataset jsonl needs a path")
    return _jsonl_prompts(Path(workload.path), workload.output_len, n, vocab_size)


def _random_prompts(workload: WorkloadSpec, n: int, vocab_size: int) -> list[Prompt]:
    span = vocab_size - FIRST_RANDOM_ID
    if span < 2:
        raise ValueError(f"vocab_size {vocab_size} leaves no room for random ids (0 and 1 are reserved)")
    # The prompt index in base `span` over the first `digits` positions makes every opening unique.
    digits = 1
    while span**digits < n:
        digits += 1
    length = workload.input_len
    if digits > length:
        raise WorkloadError(
            f"{n} random prompts of {length} token(s) cannot all differ with a vocabulary of {vocab_size}"
        )
    rng = np.random.default_rng(workload.seed)
    ids = rng.integers(FIRST_RANDOM_ID, vocab_size, size=(n, length), dtype=np.int64)
    # A random offset per digit keeps prompt 0 from always opening with id 2.
    offsets = rng.integers(0, span, size=digits, dtype=np.int64)
    index = np.arange(n, dtype=np.int64)
    for d in range(digits):
        ids[:, d] = FIRST_RANDOM_ID + (index // span**d + offsets[d]) % span
    return [Prompt(prompt_len=length, output_len=workload.output_len, input_ids=row) for row in ids.tolist()]


def workload_file_problem(path: str | Path, cap: int = MAX_WORKLOAD_BYTES) -> str | None:
    """Why `path` cannot be a workload file (not regular, over `cap`, unreadable), from metadata alone."""
    return regular_file_problem(path, cap, "a workload file")


def read_workload_file(path: str | Path, cap: int = MAX_WORKLOAD_BYTES) -> bytes:
    """A workload file's bytes: regular, at most `cap`, opened without blocking (a FIFO would hang)."""
    try:
        return read_regular_file(path, cap, "a workload file")
    except FileReadError as e:
        raise WorkloadError(str(e)) from None


def workload_problems(workloads: list[WorkloadSpec], vocab_size: int = DEFAULT_VOCAB_SIZE) -> list[str]:
    """Every reason the sweep's workload files yield no prompts, before any server starts (preflight)."""
    out: list[str] = []
    for i, w in enumerate(workloads):
        if w.dataset != "jsonl":
            continue
        try:
            build_prompts(w, 1, vocab_size)
        except WorkloadError as e:
            where = f"workload[{i}]" if len(workloads) > 1 else "workload"
            out.append(f"{where}.path: {e}")
    return out


def _jsonl_prompts(path: Path, default_output_len: int, n: int, vocab_size: int) -> list[Prompt]:
    raw_lines = read_workload_file(path).splitlines()
    prompts: list[Prompt] = []
    problems: list[str] = []
    for lineno, raw in enumerate(raw_lines, start=1):
        if not raw.strip():
            continue
        try:
            prompts.append(_parse_line(raw, default_output_len, vocab_size))
        except WorkloadError as e:
            problems.append(f"{path}:{lineno}: {e}")
    if problems:
        shown = problems[:_MAX_REPORTED_PROBLEMS]
        more = len(problems) - len(shown)
        tail = f"\n  ... and {more} more bad line(s)" if more else ""
        raise WorkloadError(f"{len(problems)} bad line(s):\n  " + "\n  ".join(shown) + tail)
    if not prompts:
        raise WorkloadError(f"{path}: no prompts (the file is empty or holds only blank lines)")
    # Fewer lines than requests: cycle, as a closed loop needs exactly n requests.
    return [prompts[i % len(prompts)] for i in range(n)]


def _parse_line(raw: bytes, default_output_len: int, vocab_size: int) -> Prompt:
    try:
        obj: Any = orjson.loads(raw)
    except orjson.JSONDecodeError as e:
        raise WorkloadError(f"not valid JSON ({e})") from None
    if not isinstance(obj, dict):
        raise WorkloadError(f"expected an object, got {type(obj).__name__}")
    has_ids, has_text = "input_ids" in obj, "prompt" in obj
    if has_ids == has_text:
        raise WorkloadError('expected exactly one of "input_ids" and "prompt"')
    output_len = obj.get("output_len", default_output_len)
    if not _token_count(output_len):
        raise WorkloadError(
            f'"output_len" must be a whole number from 1 to {MAX_TOKENS:,}, got {_shown(output_len)}'
        )
    if has_ids:
        ids = obj["input_ids"]
        if not isinstance(ids, list) or not 0 < len(ids) <= MAX_TOKENS:
            raise WorkloadError(f'"input_ids" must be a list of 1 to {MAX_TOKENS:,} integers')
        bad = next(
            (x for x in ids if not isinstance(x, int) or isinstance(x, bool) or not 0 <= x < vocab_size), None
        )
        if bad is not None:
            raise WorkloadError(f'"input_ids" holds {_shown(bad)}, not an integer id in [0, {vocab_size})')
        return Prompt(prompt_len=len(ids), output_len=output_len, input_ids=ids)
    text = obj["prompt"]
    if not isinstance(text, str) or not text:
        raise WorkloadError('"prompt" must be a non-empty string')
    prompt_len = obj.get("prompt_len", 0)
    if prompt_len != 0 and not _token_count(prompt_len):
        raise WorkloadError(
            f'"prompt_len" must be a whole number from 1 to {MAX_TOKENS:,}, got {_shown(prompt_len)}'
        )
    return Prompt(prompt_len=prompt_len, output_len=output_len, text=text)


def _token_count(x: Any) -> bool:
    """A whole token count a request may ask for (10**12 once crashed a run: issue 35)."""
    return isinstance(x, int) and not isinstance(x, bool) and 0 < x <= MAX_TOKENS


def window_prompt(prompts: list[Prompt], i: int) -> Prompt:
    """Prompt `i` past the window's prompt budget: the budget again, each round's opening changed (tokens
    rotated, text prefixed) so the radix cache cannot serve it."""
    n = len(prompts)
    base, rnd = prompts[i % n], i // n
    if rnd == 0:
        return base
    if base.input_ids is not None:
        ids = base.input_ids
        k = rnd % len(ids) if len(ids) > 1 else 0
        return Prompt(base.prompt_len, base.output_len, input_ids=ids[k:] + ids[:k])
    return Prompt(base.prompt_len, base.output_len, text=f"[{rnd}] {base.text}")
