"""The one exit-code contract of every verb (docs/reference/cli.md#exit-codes, runners/exit_codes.py): 0 nothing
found, 1 a finding, 2 no answer. Each verb is in the documented table; bad input is no answer for every verb;
`regressions` and `compare` exit 1 on what they find; a closed pipe is not an error; a bug is no answer."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from db.migrate import open_database
from runners.cli import VERBS
from runners.exit_codes import ExitCode
from synthetic.history import SMALL_SHAPE
from synthetic.history.seed import seed_history
from tests.fixtures.cli import run_cli
from tests.paths import REPO_ROOT
from tests.queue_support import cli_argv, cli_env

pytestmark = pytest.mark.slow  # tests/conftest.py starts the slow files first

SIM = """
name: contract
model: sim-tiny
server: {{backend: sim, attention_backend: flashmla, sim: {{acceptance_rate: {rate}, seed: 2, instant: true}}}}
grid: {{batch_sizes: [1], spec_modes: [v2], steps: [3], topk: [1], baseline: false}}
workload: {{input_len: 16, output_len: 32}}
repeats: 3
"""


def _documented() -> dict[str, str]:
    """Verb (`db current` for a sub-verb) -> what the per-verb table of cli.md says makes it exit 1."""
    section = (REPO_ROOT / "docs" / "reference" / "cli.md").read_text().split("## Exit codes", 1)[1]
    out: dict[str, str] = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 2 and cells[0].startswith("`"):
            for name in re.findall(r"`([a-z-]+(?: [a-z]+)?)`", cells[0]):
                out[name] = cells[1]
    return out


def test_every_verb_is_in_the_documented_contract() -> None:
    documented = _documented()
    verbs = {name.split()[0] for name in documented}
    assert set(VERBS) <= verbs, sorted(set(VERBS) - verbs)
    assert {v for v, says in documented.items() if not says.startswith("never")} == {
        "run",
        "ci",
        "compare",
        "regressions",
        "gate",
        "crosscheck",
        "db current",
    }


@pytest.mark.parametrize("verb", sorted(VERBS))
def test_bad_input_is_no_answer_in_every_verb(verb: str) -> None:
    out = run_cli(verb, "--no-such-option")
    assert out.returncode == ExitCode.ERROR, out.stdout + out.stderr
    assert "Traceback" not in out.stderr


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> str:
    """`make demo`'s seeded history: regressions with their causes."""
    url = f"sqlite:///{tmp_path_factory.mktemp('contract') / 'history.db'}"
    eng = open_database(url)
    seed_history(eng, 600, shape=SMALL_SHAPE, end=datetime.now(UTC), seed=0)
    eng.dispose()
    return url


def test_regressions_exit_1_until_every_regression_is_dismissed(history: str) -> None:
    listed = run_cli("regressions", "--db", history, "--since", "3650d", "--format", "json")
    rows = json.loads(listed.stdout)
    assert rows and all(r["direction"] == "regression" for r in rows)
    assert listed.returncode == ExitCode.FINDING, listed.stderr
    table = run_cli("regressions", "--db", history, "--since", "3650d")
    assert table.returncode == ExitCode.FINDING and "flagged change(s)" in table.stdout
    runs = sorted({int(r["run_id"]) for r in rows})
    for run in runs:  # acknowledged: real, so still a finding
        done = run_cli("triage", str(run), "--state", "acknowledged", "--db", history, "--since", "3650d")
        assert done.returncode == ExitCode.OK, done.stdout + done.stderr
    assert run_cli("regressions", "--db", history, "--since", "3650d").returncode == ExitCode.FINDING
    for run in runs:
        done = run_cli("triage", str(run), "--state", "dismissed", "--db", history, "--since", "3650d")
        assert done.returncode == ExitCode.OK, done.stdout + done.stderr
    clean = run_cli("regressions", "--db", history, "--since", "3650d")
    assert clean.returncode == ExitCode.OK and "no flagged" in clean.stdout, clean.stdout
    shown = run_cli("regressions", "--db", history, "--since", "3650d", "--include-dismissed")
    assert shown.returncode == ExitCode.OK and "flagged change(s)" in shown.stdout  # listed, not a finding
    # Nothing to triage is no answer, not a finding.
    again = run_cli("triage", str(runs[0]), "--state", "dismissed", "--db", history, "--since", "1h")
    assert again.returncode == ExitCode.ERROR, again.stdout + again.stderr


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, int, int]:
    """Two stand-in runs of one configuration: the second accepts far fewer drafts."""
    tmp = tmp_path_factory.mktemp("pair")
    url = f"sqlite:///{tmp / 'pair.db'}"
    for label, rate in (("good", 0.9), ("bad", 0.2)):
        sweep = tmp / f"{label}.yaml"
        sweep.write_text(SIM.format(rate=rate))
        done = run_cli("run", str(sweep), "--db", url, "--label", label, "--log-dir", str(tmp / "logs"))
        assert done.returncode == ExitCode.OK, done.stdout + done.stderr
    runs = json.loads(run_cli("runs", "--db", url, "--format", "json").stdout)
    ids = {r["label"]: int(r["id"]) for r in runs}
    return url, ids["good"], ids["bad"]


@pytest.mark.parametrize("format", ["table", "md", "json", "csv", "comment"])
def test_compare_exits_1_on_a_regression_in_every_format(two_runs: tuple[str, int, int], format: str) -> None:
    url, good, bad = two_runs
    common = ["--db", url, "--metric", "accept_length", "--format", format]
    worse = run_cli("compare", str(good), str(bad), *common)
    assert worse.returncode == ExitCode.FINDING, worse.stdout + worse.stderr
    assert "1 regression" in worse.stderr
    better = run_cli("compare", str(bad), str(good), *common)
    assert better.returncode == ExitCode.OK, better.stdout + better.stderr
    assert "1 improvement" in better.stderr
    # A run against itself is refused, as `ci` refuses it (by any name of the run).
    same = run_cli("compare", str(good), str(good), *common)
    assert same.returncode == ExitCode.ERROR and f"the same run ({good})" in same.stderr, same.stderr
    assert run_cli("compare", str(bad), "latest", *common).returncode == ExitCode.ERROR
    # The old CI flag still parses and changes nothing.
    old = run_cli("compare", str(good), str(bad), *common, "--fail-on-regression")
    assert old.returncode == ExitCode.FINDING


def test_a_closed_pipe_is_not_an_error(two_runs: tuple[str, int, int]) -> None:
    """`specbench runs | head -3`: the reader goes away, the verb exits 0 and says nothing. The pipe's read end
    is closed before the verb starts, so every write to it fails: no race with the reader."""
    url, good, bad = two_runs
    for argv, code in (
        (["runs"], ExitCode.OK),
        (["runs", "--format", "json"], ExitCode.OK),
        (["export", "--run", str(bad), "--format", "csv"], ExitCode.OK),
        # a finding already made survives the closed pipe
        (["compare", str(good), str(bad), "--metric", "accept_length", "--format", "md"], ExitCode.FINDING),
    ):
        read, write = os.pipe()
        os.close(read)
        try:
            done = subprocess.run(
                cli_argv(*argv, "--db", url),
                cwd=REPO_ROOT,
                env=cli_env(),
                stdout=write,
                stderr=subprocess.PIPE,
                text=True,
                timeout=120,
            )
        finally:
            os.close(write)
        assert done.returncode == code, (argv, done.stderr)
        assert "Traceback" not in done.stderr and "Broken pipe" not in done.stderr, done.stderr
        assert "error" not in done.stderr.lower(), done.stderr


def test_a_bug_is_no_answer_in_one_line(tmp_path: Path) -> None:
    """An exception no verb expected (here: the database layer raising one) exits 2 with one line, not a
    traceback and not 1, which would read as a finding."""
    code = (
        "import sys\n"
        "import runners.common as common\n"
        "def boom(url):\n"
        "    raise RuntimeError('something specbench did not expect')\n"
        "common.open_db_readonly = boom\n"
        "import runners.cli\n"
        "sys.argv = ['specbench', *sys.argv[1:]]\n"
        "runners.cli.main()\n"
    )
    argv = [sys.executable, "-c", code, "runs", "--db", f"sqlite:///{tmp_path / 'x.db'}"]
    done = subprocess.run(argv, cwd=REPO_ROOT, env=cli_env(), capture_output=True, text=True, timeout=120)
    assert done.returncode == ExitCode.ERROR, done.stderr
    lines = done.stderr.strip().splitlines()
    assert lines[-1].startswith("error: unexpected RuntimeError: something specbench did not expect"), lines
    assert "Traceback" not in done.stderr
    loud = subprocess.run(
        argv, cwd=REPO_ROOT, env=cli_env(SPECBENCH_DEBUG="1"), capture_output=True, text=True, timeout=120
    )
    assert "Traceback" in loud.stderr and loud.returncode != ExitCode.OK
