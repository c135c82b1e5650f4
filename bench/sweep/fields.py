"""A sweep file's field types and limits: every value a user writes goes through one of these types."""

import math
import re
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BeforeValidator, Field, PlainValidator

from bench.host.cpu_affinity import parse_cpu_list
from bench.server.env import ServerEnvError, as_env_value, sweep_name_problem

Activity = Literal["CPU", "GPU"]
Backend = Literal["sglang", "sim", "external"]
Algorithm = Literal["EAGLE", "NEXTN", "EAGLE3", "STANDALONE"]
LoadFormat = Literal["auto", "dummy"]
# SGLang's switch that pins acceptance (contract §1.3); `grid.accept_lengths` sets it per server config.
SIMULATE_ACC_ENV = "SGLANG_SIMULATE_ACC_LEN"
# Window length without `measure.min_window_s`: 10 s hold thousands of GPU steps; the stand-in's stay short.
DEFAULT_MIN_WINDOW_S: dict[str, float] = {"sglang": 10.0, "external": 10.0, "sim": 0.0}
# Repeats when the sweep does not say: v1/v2 pairs need more to put an interval on their ratio.
DEFAULT_REPEATS, DEFAULT_PAIRED_REPEATS = 3, 5

# FlashMLA's multi-step draft backend raises for topk > 1, and its page size of 64 rules out tree drafts.
TOPK1_ONLY_BACKENDS = frozenset({"flashmla"})
_SLUG = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
# A sweep larger than this is a typo (or an attack on the queue), not a night of benchmarks.
MAX_SERVER_CONFIGS = 1000
MAX_POINTS = 100_000


# ---- Field types: strict, finite and bounded; a new field picks its bounds by picking its type.


def _text(v: str) -> str:
    if not v.strip():
        raise ValueError("must not be empty")
    if not v.isprintable():
        raise ValueError("contains a newline, tab or other control character")
    return v


def _slug(v: str) -> str:
    if not _SLUG.match(v):
        raise ValueError(
            "use letters, digits, '.', '_' or '-' (at most 100, starting with a letter or digit)"
        )
    return v


def _not_a_flag(v: str) -> str:
    if v.startswith("-"):  # argparse would read it as a flag; no SGLang path or name starts with '-'
        raise ValueError("must not start with '-'")
    return v


# One line of printable text: model paths, names, URLs.
Text = Annotated[str, Field(min_length=1, max_length=1024), AfterValidator(_text)]
PathText = Annotated[Text, AfterValidator(_not_a_flag)]  # a model or file path handed to the server's argv
Slug = Annotated[str, AfterValidator(_slug)]
Seconds = Annotated[float, Field(gt=0, le=7 * 24 * 3600)]  # a week: longer is a typo
Seed = Annotated[int, Field(ge=0, le=2**63 - 1)]
BatchSize = Annotated[int, Field(ge=1, le=65_536)]
Steps = Annotated[int, Field(ge=1, le=64)]
TopK = Annotated[int, Field(ge=1, le=64)]
MAX_TOKENS = 1_000_000  # a request's input or output length; a workload file's lines too (bench/workload.py)
Tokens = Annotated[int, Field(ge=1, le=MAX_TOKENS)]
AcceptLength = Annotated[float, Field(ge=1.0, le=64.0)]  # tokens committed per verify step
MAX_PROMPTS = 1_000_000


def list_of(item: Any, n: int = 64) -> Any:
    """A non-empty list: an empty one would silently drop every config it multiplies."""
    return Annotated[list[item], Field(min_length=1, max_length=n)]  # type: ignore[valid-type]


def num_prompts_value(v: Any) -> int | Literal["auto"]:
    if v == "auto":
        return "auto"
    if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= MAX_PROMPTS:
        raise ValueError(f"must be an integer from 1 to {MAX_PROMPTS:,} or 'auto'")
    return v


def draft_tokens_value(v: Any) -> Literal["auto"] | list[int]:
    if v == "auto":
        return "auto"
    if not isinstance(v, list) or not v:
        raise ValueError("must be 'auto' or a non-empty list of integers")
    lo, hi = 2, 4096
    bad = [x for x in v if isinstance(x, bool) or not isinstance(x, int) or not lo <= x <= hi]
    if bad or len(v) > 64:
        raise ValueError(
            f"must be 'auto' or a list of up to 64 integers from {lo} to {hi} (got {bad[0]!r})"
            if bad
            else "at most 64 values"
        )
    return list(v)


# Sorted, distinct CPU numbers (server.cpu_affinity) from `"2-7,10"` or `[2, 3]`: syntax here, CPUs at launch
# (the sweep may come from another machine).
CpuList = Annotated[tuple[int, ...], PlainValidator(parse_cpu_list)]

ArgValue = str | int | float | bool | list[int] | list[str]


def arg_value(v: Any) -> ArgValue:
    """A flag's value: one scalar or a short list of ints or strings; finite, printable, bounded."""

    def scalar_problem(x: Any) -> str | None:
        if isinstance(x, bool):
            return None
        if isinstance(x, int):
            return None if abs(x) < 2**53 else "integer out of range"
        if isinstance(x, float):
            return None if math.isfinite(x) and abs(x) < 1e15 else f"{x} is not a finite, bounded number"
        if isinstance(x, str):
            if len(x) > 4096:
                return "longer than 4096 characters"
            return None if x.isprintable() else "contains a newline, NUL or other control character"
        return f"must be a string, number, boolean or list of them, not {type(x).__name__}"

    if isinstance(v, list):
        if not v or len(v) > 256:
            raise ValueError("a list value needs 1 to 256 items")
        if not (
            all(isinstance(x, int) and not isinstance(x, bool) for x in v)
            or all(isinstance(x, str) for x in v)
        ):
            raise ValueError("a list value holds integers only or strings only")
    if problems := [p for p in map(scalar_problem, v if isinstance(v, list) else [v]) if p]:
        raise ValueError(problems[0])
    return v  # type: ignore[no-any-return]


def _env_scalar(v: Any) -> str:
    # YAML makes `SGLANG_SIMULATE_ACC_LEN: 2.5` a float; the env holds strings; null or a mapping is wrong.
    try:
        return as_env_value(v)
    except ServerEnvError as e:
        raise ValueError(str(e)) from None


def _env_name(v: str) -> str:
    if problem := sweep_name_problem(v):
        raise ValueError(problem)
    return v


EnvName = Annotated[str, AfterValidator(_env_name)]
EnvValue = Annotated[str, BeforeValidator(_env_scalar)]
