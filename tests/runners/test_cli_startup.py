"""`specbench --help` and the light verbs start without the heavy libraries: verbs load lazily (runners/cli.py),
and what `--help` lists is what each verb says of itself."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from typing import Any

import pytest
from typer.testing import CliRunner

from runners.cli import VERBS, app, load_verb
from tests.paths import REPO_ROOT
from tests.queue_support import cli_env

HEAVY = ("pandas", "streamlit", "altair")
# Verbs that read or write the queue and schema only: no data frames needed to start them. And `run`, which
# every sweep, CI step and worker job starts: it needs data frames only for a dry run's resume check.
LIGHT = ("submit", "worker", "jobs", "schedule", "scheduler", "db", "profile", "seed", "run")


def _imported(*args: str) -> set[str]:
    """Every module `python -X importtime -m runners.cli ARGS` imported by an import statement (its stderr
    report; `importlib.import_module`, which loads the verb itself, goes unreported)."""
    out = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "runners.cli", *args],
        cwd=REPO_ROOT,
        env=cli_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert out.returncode == 0 and "Usage:" in out.stdout, out.stdout + out.stderr
    names = {m.group(1) for m in re.finditer(r"^import time:.*\|\s*([\w.]+)\s*$", out.stderr, re.M)}
    assert "runners" in names and "typer" in names  # the report was read
    return names


def _top(names: set[str]) -> set[str]:
    return {n.split(".")[0] for n in names}


def test_help_imports_no_verb_and_no_heavy_library() -> None:
    names = _imported("--help")
    assert not _top(names) & set(HEAVY), sorted(_top(names) & set(HEAVY))
    assert not {n for n in names if n.startswith("runners.commands.")}


# `specbench VERB --help` for each light verb in turn, in one interpreter (one per verb cost a second of imports
# each): after each, the top-level modules imported so far. They only grow, so a heavy library one verb pulls
# in shows after that verb and every later one; none may show at all.
_EACH_VERB = """
import json, sys
from runners.cli import VERBS, app
seen = {}
for verb in sys.argv[1:]:
    try:
        app([verb, "--help"], prog_name="specbench")
    except SystemExit as e:
        assert e.code == 0, (verb, e.code)
    own = "runners.commands." + VERBS[verb].module
    seen[verb] = {"own": own in sys.modules, "top": sorted({name.split(".")[0] for name in sys.modules})}
print(json.dumps(seen))
"""


@pytest.fixture(scope="module")
def after_each_light_verb() -> dict[str, dict[str, Any]]:
    out = subprocess.run(
        [sys.executable, "-c", _EACH_VERB, *LIGHT],
        cwd=REPO_ROOT,
        env=cli_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    seen: dict[str, dict[str, Any]] = json.loads(out.stdout.splitlines()[-1])
    return seen


@pytest.mark.parametrize("verb", LIGHT)
def test_light_verbs_start_without_pandas(
    verb: str, after_each_light_verb: dict[str, dict[str, Any]]
) -> None:
    seen = after_each_light_verb[verb]
    assert seen["own"]  # the verb's module was loaded, with what every verb shares
    names = set(seen["top"])
    assert not names & set(HEAVY), sorted(names & set(HEAVY))


def test_help_lists_every_verb_with_its_own_summary() -> None:
    res = CliRunner().invoke(app, ["--help"], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    for name, verb in VERBS.items():
        command = load_verb(name)
        own = " ".join((command.help or "").split("\n\n")[0].split())
        assert own == verb.summary, f"{name}: --help lists {verb.summary!r}, the verb says {own!r}"
        assert re.search(rf"^\W*{re.escape(name)}\s", res.output, re.M), name


def test_a_verb_runs_through_the_lazy_group() -> None:
    res = CliRunner().invoke(app, ["runs", "--db", "sqlite:////nonexistent/dir/x.db"])
    assert res.exit_code == 2 and "no database file" in res.output
    res = CliRunner().invoke(app, ["no-such-verb"])
    assert res.exit_code == 2 and "No such command" in res.output
