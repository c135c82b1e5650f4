"""The server variables a sweep may set are an explicit list (bench/server/env_names.py): every name on it is
read by the pinned SGLang release, the contract doc lists exactly these names, and nothing else passes
(issue 30 §3).

Finding the names in SGLang's source needs the pinned release's source: SPECBENCH_SGLANG_SOURCE (a directory
holding the `sglang` package, e.g. an unpacked wheel), else the package that SPECBENCH_BENCH_SERVING_PYTHON (or
.venv-bench-serving, scripts/bench_serving_client.sh, as CI builds it) has installed. Skips when neither is
there, unless SPECBENCH_REQUIRE_SGLANG_SOURCE=1 or SPECBENCH_REQUIRE_BENCH_SERVING=1 (CI) makes it a failure.
"""

from __future__ import annotations

import re

import pytest

from bench.server.env import build_server_env, check_sweep_env, sweep_name_problem
from bench.server.env_names import SET_BY_SPECBENCH, SWEEP_NAMES, SWEEP_VARIABLES
from bench.server.spec_modes import DEFAULT_RELEASE, RELEASES
from bench.sweep import SweepError, parse_sweep
from tests.fixtures.bench_serving_client import WAIT_TIMEOUT
from tests.fixtures.sglang_source import pinned_source
from tests.paths import REPO_ROOT

pytestmark = WAIT_TIMEOUT  # the SGLang source may come from the client CI is still installing

CONTRACT = REPO_ROOT / "docs" / "reference" / "sglang-contract.md"
SECTION = "### 1.7 Server variables a sweep may set"
# Issue 30 §3: each of these loads code or changes compilation, and each sat inside an allowed prefix family.
LOADERS = (
    "SGLANG_EXTERNAL_MODEL_PACKAGE",
    "TRITON_CACHE_MANAGER",
    "TRITON_REMOTE_CACHE_BACKEND",
    "FLASHINFER_EXTRA_CFLAGS",
    "FLASHINFER_EXTRA_LDFLAGS",
)


def test_every_listed_name_appears_in_the_pinned_release_source() -> None:
    package = pinned_source()
    wanted = {*SWEEP_NAMES, *SET_BY_SPECBENCH}
    word = re.compile(r"\b(" + "|".join(sorted(wanted, key=len, reverse=True)) + r")\b")
    found: set[str] = set()
    for path in package.rglob("*.py"):
        found.update(word.findall(path.read_text(errors="replace")))
        if found == wanted:
            break
    assert found == wanted, f"not in sglang {DEFAULT_RELEASE}'s source: {sorted(wanted - found)}"
    # environ.py itself is where the SGLang names are declared; the five loaders are read there too.
    environ = (package / "srt" / "environ.py").read_text()
    assert (
        "SGLANG_EXTERNAL_MODEL_PACKAGE" in environ
    )  # the source still has it, and the list still refuses it


def test_the_contract_doc_lists_exactly_these_names() -> None:
    text = CONTRACT.read_text()
    assert SECTION in text
    section = text.split(SECTION, 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `([A-Z0-9_]+)` \| ([0-9.a-z]+) \| (.+) \|$", section, re.MULTILINE)
    assert [(n, since, tunes) for n, since, tunes in rows] == [tuple(v) for v in SWEEP_VARIABLES]
    for name in SET_BY_SPECBENCH:
        assert f"`{name}`" in section


def test_the_list_is_names_with_a_release_and_a_line_each_and_no_path_or_loader() -> None:
    assert len(SWEEP_NAMES) == len(SWEEP_VARIABLES), "a name is listed twice"
    for v in SWEEP_VARIABLES:
        assert re.fullmatch(r"[A-Z][A-Z0-9_]*", v.name), v
        assert v.since in RELEASES and v.tunes and "\n" not in v.tunes, v
        # A name that points at a file, directory or program is the host's business, never a job's.
        words = set(v.name.split("_"))
        assert not words & {
            "PATH",
            "DIR",
            "HOME",
            "FILE",
            "PLUGIN",
            "PLUGINS",
            "PACKAGE",
            "MANAGER",
            "BACKEND",
        }, v
        assert not words & {"CFLAGS", "LDFLAGS", "ARCH"}, v
    assert not SWEEP_NAMES & set(SET_BY_SPECBENCH)


@pytest.mark.parametrize("name", LOADERS)
def test_the_five_loaders_are_refused_when_read_and_when_launched(name: str) -> None:
    problem = sweep_name_problem(name)
    assert problem is not None and "load or run code" in problem
    with pytest.raises(SweepError) as e:
        parse_sweep(
            f"name: t\nmodel: sim-tiny\nserver: {{backend: sim, env: {{{name}: x}}}}\ngrid: {{batch_sizes: [1]}}\n"
        )
    assert any(name in p for p in e.value.problems)
    # A job stored before this check reaches the launcher's builder, which refuses it again.
    assert check_sweep_env({name: "x"})
    with pytest.raises(ValueError, match=name):
        build_server_env({"PATH": "/usr/bin"}, {name: "x"}, {})


def test_every_listed_name_is_accepted_and_passed_to_the_server() -> None:
    env = build_server_env({"PATH": "/usr/bin"}, dict.fromkeys(SWEEP_NAMES, "1"), {})
    assert set(env) >= SWEEP_NAMES


def test_the_sweeps_and_examples_set_only_listed_names() -> None:
    """Every `server.env` in the repository's sweeps (and example sweeps) is on the list."""
    import yaml

    files = [
        *sorted((REPO_ROOT / "sweeps").glob("*.yaml")),
        *sorted((REPO_ROOT / "examples").rglob("*.yaml")),
    ]
    seen = 0
    for path in files:
        data = yaml.safe_load(path.read_text())
        env = (data.get("server") or {}).get("env") if isinstance(data, dict) else None
        for name in env or {}:
            seen += 1
            assert name in SWEEP_NAMES, f"{path.name}: {name}"
    assert seen >= 2  # h200-simacc*.yaml pin the acceptance
