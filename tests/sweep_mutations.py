"""Mutated sweep files, for the fuzz test and the chaos bench's flood of bad submissions.

    for label, raw in mutated_sweeps(n=300, seed=0):
        load_sweep(write(raw))   # must return a sweep or raise SweepError, never anything else

Each mutation starts from a shipped sweep (sweeps/*.yaml) and breaks it the ways people and attackers do:
hostile values in any field (wrong types, inf, 1e30, huge integers, empty lists, control characters, null in
env), misspelled and duplicated keys, forbidden env names, YAML alias bombs, deep nesting, and bytes that are
not UTF-8. Deterministic for a given seed.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

SWEEPS_DIR = Path(__file__).resolve().parents[1] / "sweeps"

HOSTILE_VALUES: list[Any] = [
    None,
    "",
    " ",
    "3",
    "auto",
    -1,
    0,
    1,
    2**63,
    10**30,
    1e30,
    float("inf"),
    float("-inf"),
    float("nan"),
    -0.0,
    True,
    False,
    [],
    {},
    [[]],
    [None],
    ["3"],
    [0, -1],
    [1e30],
    {"a": {"b": {"c": 1}}},
    "a\nb",
    "a\x00b",
    "x" * 5000,
    "</details><img src=x onerror=alert(1)>",
    "```\n| a | b |",
    "[bold]x[/]",
    "-rf",
    "${DATABASE_URL}",
    "$(id)",
    "\u202e\u200b",
]

ALIAS_BOMB = """\
server:
  backend: sim
  env:
    SGLANG_A: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
    SGLANG_B: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
    SGLANG_C: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
    SGLANG_D: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
    SGLANG_E: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
    SGLANG_F: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
    SGLANG_G: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
    SGLANG_H: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]
    SGLANG_I: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]
"""

ENV_NAMES = [
    "BROWSER",
    "LD_PRELOAD",
    "PYTHONPATH",
    "PYTHONWARNINGS",
    "DATABASE_URL",
    "SPECBENCH_DB",
    "TRITON_PTXAS_PATH",
    "NCCL_NET_PLUGIN",
    "SGLANG_EXTERNAL_MODEL_PACKAGE",
    "TRITON_CACHE_MANAGER",
    "FLASHINFER_EXTRA_CFLAGS",
    "lower",
    "A-B",
    "",
    "SGLANG_LOG_MS",
]


def base_sweeps() -> list[tuple[str, str]]:
    return [(p.name, p.read_text()) for p in sorted(SWEEPS_DIR.glob("*.yaml"))]


def _leaf_paths(data: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out: list[tuple[Any, ...]] = [prefix] if prefix else []
    if isinstance(data, dict):
        for k, v in data.items():
            out.extend(_leaf_paths(v, (*prefix, k)))
    elif isinstance(data, list):
        for i, v in enumerate(data):
            out.extend(_leaf_paths(v, (*prefix, i)))
    return out


def _set(data: Any, path: tuple[Any, ...], value: Any) -> None:
    for part in path[:-1]:
        data = data[part]
    data[path[-1]] = value


def _delete(data: Any, path: tuple[Any, ...]) -> None:
    for part in path[:-1]:
        data = data[part]
    del data[path[-1]]


# libyaml when present: the generator should cost less than what it tests.
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def _load(text: str) -> Any:
    return yaml.load(text, Loader=_LOADER)  # a safe loader


def _dump(data: Any) -> str:
    return yaml.dump(data, Dumper=_DUMPER, sort_keys=False, allow_unicode=True)


def _typo(word: str, rng: random.Random) -> str:
    if len(word) < 2:
        return word + "x"
    i = rng.randrange(len(word) - 1)
    return word[:i] + word[i + 1] + word[i] + word[i + 2 :]


def _structural(data: dict[str, Any], rng: random.Random) -> tuple[str, str]:
    paths = _leaf_paths(data)
    if not paths:
        return "unchanged", _dump(data)
    path = rng.choice(paths)
    kind = rng.randrange(6)
    if kind <= 2:
        value = rng.choice(HOSTILE_VALUES)
        _set(data, path, value)
        return f"set {'.'.join(map(str, path))} = {value!r:.40}", _dump(data)
    if kind == 3:
        _delete(data, path)
        return f"delete {'.'.join(map(str, path))}", _dump(data)
    if kind == 4:  # misspell a key
        parent_path, key = path[:-1], path[-1]
        parent = data
        for part in parent_path:
            parent = parent[part]
        if isinstance(parent, dict) and isinstance(key, str):
            parent[_typo(key, rng)] = parent.pop(key)
            return f"misspell {key}", _dump(data)
        return "unchanged", _dump(data)
    server = data.setdefault("server", {})
    if not isinstance(server, dict):
        server = data["server"] = {}
    name = rng.choice(ENV_NAMES)
    server["env"] = {name: rng.choice([*HOSTILE_VALUES, "1", "sh -c id"])}
    return f"env {name}", _dump(data)


def _textual(name: str, text: str, rng: random.Random) -> tuple[str, bytes]:
    raw = text.encode()
    kind = rng.randrange(10)
    if kind == 0:
        cut = rng.randrange(len(raw))
        return f"{name}: truncated at {cut}", raw[:cut]
    if kind == 1:
        i = rng.randrange(len(raw))
        return f"{name}: invalid UTF-8 at {i}", raw[:i] + bytes([rng.choice([0x80, 0xC3, 0xFF, 0xFE])]) + raw[
            i:
        ]
    if kind == 2:
        i = rng.randrange(len(raw))
        return f"{name}: byte flip at {i}", raw[:i] + bytes([raw[i] ^ (1 << rng.randrange(8))]) + raw[i + 1 :]
    if kind == 3:
        first = text.splitlines(keepends=True)[0]
        return f"{name}: duplicated first key", (first + text).encode()
    if kind == 4:
        return f"{name}: alias bomb in server.env", (text.split("server:")[0] + ALIAS_BOMB).encode()
    if kind == 5:
        depth = rng.choice([100, 1000, 5000])
        return f"{name}: nesting {depth}", (text + "\nextra: " + "[" * depth + "]" * depth + "\n").encode()
    if kind == 6:
        digits = rng.choice([30, 400, 5000])
        return f"{name}: {digits}-digit repeats", (text + f"\nrepeats: {'9' * digits}\n").encode()
    if kind == 7:
        return f"{name}: NUL byte", raw.replace(b"\n", b"\n\x00", 1)
    if kind == 8:
        return f"{name}: python tag", (text + "\nx: !!python/object/apply:os.system ['id']\n").encode()
    return f"{name}: bad date", (text + "\nname: 2026-13-45\n").encode()


def mutated_sweeps(n: int = 250, seed: int = 0) -> Iterator[tuple[str, bytes]]:
    """`n` (label, file bytes) pairs: two in three structural mutations, the rest textual ones."""
    rng = random.Random(seed)
    bases = base_sweeps()
    for _ in range(n):
        name, text = rng.choice(bases)
        if rng.random() < 0.66:
            data = _load(text)
            for _ in range(rng.choice([1, 1, 2, 3])):
                label, out = _structural(data, rng)
                data = _load(out)
            yield f"{name}: {label}", out.encode()
        else:
            yield _textual(name, text, rng)
