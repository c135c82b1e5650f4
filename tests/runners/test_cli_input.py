"""Every CLI id, URL and file argument gives a clean error (exit 2, no traceback), and no message or argv
shows a database password (issue 10 §6 and §7)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from db.engine import redact, resolve_url, scrub
from runners.cli import app
from tests.paths import REPO_ROOT

EXAMPLE = REPO_ROOT / "examples" / "h200-sglang-0.5.13.post1.db"
PASSWORD = "Sup3r-s3cret"
PG_WITH_PASSWORD = f"postgresql://specbench:{PASSWORD}@127.0.0.1:1/specbench"


@pytest.fixture(scope="module")
def example_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    copy = tmp_path_factory.mktemp("cli") / "example.db"
    shutil.copy(EXAMPLE, copy)
    return f"sqlite:///{copy}"


def invoke(*argv: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(argv))
    assert "Traceback" not in result.output
    # A SystemExit from typer is the clean path; anything else escaped the command.
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    return result.exit_code, result.output


@pytest.mark.parametrize(
    ("ref", "needle"),
    [
        ("latest~abc", "latest~N"),
        ("latest~", "latest~N"),
        ("latest~-1", "latest~N"),
        ("99999999999999999999", "no run with id"),
        ("9223372036854775808", "no run with id"),
        ("latest~999999", "fewer than"),
        ("", "at least 6 characters"),
        ("%_%_%_", "no run with uid"),
    ],
)
def test_compare_refs_fail_cleanly(example_url: str, ref: str, needle: str) -> None:
    code, out = invoke("compare", ref, "latest", "--db", example_url)
    assert code == 2, out
    assert needle in out


@pytest.mark.parametrize(
    "argv",
    [
        ["export", "--run", "99999999999999999999"],
        ["jobs", "--cancel", "99999999999999999999"],
        ["schedule", "remove", "99999999999999999999"],
        ["run", "sweeps/demo-sim.yaml", "--resume-run", "99999999999999999999", "--dry-run"],
    ],
)
def test_huge_ids_fail_cleanly(example_url: str, argv: list[str]) -> None:
    code, out = invoke(*argv, "--db", example_url)
    assert code == 2, out


@pytest.mark.parametrize("priority", ["99999999999999999999", "-99999999999999999999"])
def test_huge_priorities_fail_cleanly(tmp_path: Path, priority: str) -> None:
    code, out = invoke(
        "submit", "sweeps/demo-sim.yaml", "--db", f"sqlite:///{tmp_path}/q.db", "--priority", priority
    )
    assert code == 2, out


@pytest.mark.parametrize("verb", [["jobs"], ["export"], ["compare", "latest", "latest"], ["db", "current"]])
def test_a_bad_db_url_fails_cleanly(verb: list[str]) -> None:
    code, out = invoke(*verb, "--db", "notaurl")
    assert code == 2, out
    assert "cannot be parsed" in out


def test_db_from_an_environment_variable(example_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEAM_DB", example_url)
    code, out = invoke("compare", "latest~1", "latest", "--db", "env:TEAM_DB", "--format", "json")
    assert code in (0, 1), out
    code, out = invoke("jobs", "--db", "env:NO_SUCH_VARIABLE_SET")
    assert code == 2 and "'NO_SUCH_VARIABLE_SET' is not set" in out


def test_a_password_in_argv_is_refused_and_never_printed() -> None:
    code, out = invoke("jobs", "--db", PG_WITH_PASSWORD)
    assert code == 2
    assert PASSWORD not in out
    assert "env:NAME" in out and "***" in out


def test_import_never_prints_the_password(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # issue 10 §6: this printed the password in its error.
    code, out = invoke("import", PG_WITH_PASSWORD, "--db", f"sqlite:///{tmp_path}/x.db")
    assert code == 2 and PASSWORD not in out
    # Through the environment, the source is read; the unreachable server's error is shown without it.
    monkeypatch.setenv("SOURCE_DB", PG_WITH_PASSWORD)
    code, out = invoke("import", "env:SOURCE_DB", "--db", f"sqlite:///{tmp_path}/x.db")
    assert code == 2, out
    assert "cannot open postgresql+psycopg://specbench:***@127.0.0.1:1/specbench" in out.replace("\n", "")
    assert PASSWORD not in out


@pytest.mark.parametrize(
    "argv",
    [
        ["run", "/nonexistent/sweep.yaml", "--dry-run"],
        ["submit", "/nonexistent/sweep.yaml"],
        ["schedule", "add", "/nonexistent/sweep.yaml", "--cron", "0 2 * * *"],
        ["import", "/nonexistent/runs.db"],
    ],
)
def test_missing_files_fail_cleanly(tmp_path: Path, argv: list[str]) -> None:
    code, out = invoke(*argv, "--db", f"sqlite:///{tmp_path}/x.db")
    assert code == 2, out
    assert "/nonexistent/" in out


def test_redaction_helpers_use_the_library() -> None:
    assert PASSWORD not in redact(PG_WITH_PASSWORD) and "***" in redact(PG_WITH_PASSWORD)
    assert redact("not a url") == "<unparseable database URL>"
    encoded = "postgresql://u:p%40ss%2Fw@h/db"  # password "p@ss/w"
    assert "p@ss/w" not in scrub("auth failed for p@ss/w (p%40ss%2Fw)", encoded)
    assert resolve_url("postgres://u@h/db") == "postgresql+psycopg://u@h/db"


def test_docs_and_compose_keep_passwords_out_of_argv() -> None:
    import yaml

    root = REPO_ROOT
    compose = yaml.safe_load((root / "docker-compose.yml").read_text())
    for name, service in compose["services"].items():
        command = service.get("command") or []
        assert "--db" not in command, name  # the URL reaches containers through DATABASE_URL
    docs = (root / "docs" / "guide" / "team-setup.md").read_text()
    assert "--db postgresql" not in docs and "--db $" not in docs


@pytest.mark.parametrize(
    "argv",
    [
        ["jobs", "--limit", "99999999999999999999"],
        ["export", "--output", "/nonexistent/dir/x.csv"],
        ["compare", "latest~1", "latest", "--output", "/nonexistent/dir/x.md"],
        ["submit", "sweeps/demo-sim.yaml", "--label", "a\nb"],
        ["run", "sweeps/demo-sim.yaml", "--dry-run", "--label", "x" * 300],
    ],
)
def test_other_arguments_fail_cleanly(example_url: str, argv: list[str]) -> None:
    code, out = invoke(*argv, "--db", example_url)
    assert code == 2, out


# ---- bounded inputs (issue 30 §9): checked before any query, one line each


@pytest.mark.parametrize(
    ("ref", "needle"),
    [
        ("¹²³", "at least 6 characters"),  # passes str.isdigit, fails int()
        ("١٢٣٤٥٦٧", "no run with uid"),  # Arabic-Indic digits: not an id, not a uid
        ("2147483648", "no run with id"),  # past PostgreSQL's 32-bit id columns
        ("0", "no run with id"),
        ("a" * 100_000, "characters long"),  # refused before any LIKE pattern is built
        ("a" * 4000, "no run with uid"),
        ("0" * 4000, "no run with id"),
        ("latest~" + "9" * 50, "latest~N"),
        ("../../etc/passwd", "no run with uid"),
    ],
)
def test_run_references_are_checked_before_any_query(example_url: str, ref: str, needle: str) -> None:
    for argv in (
        ["compare", ref, "latest"],
        ["export", "--run", ref],
        ["runs", "--yaml", ref],
        ["triage", ref, "--state", "open"],
    ):
        code, out = invoke(*argv, "--db", example_url)
        assert code == 2, (argv, out)
        assert needle in out, (argv, out)
        assert len(out.strip().splitlines()) == 1 and len(out) < 300, out


@pytest.mark.parametrize(
    "argv",
    [
        ["jobs", "--cancel", "2147483648"],
        ["schedule", "remove", "2147483648"],
        ["profile", "redo", "--run", "2147483648"],
    ],
)
def test_ids_past_32_bits_are_refused(example_url: str, argv: list[str]) -> None:
    code, out = invoke(*argv, "--db", example_url)
    assert code == 2, out


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["regressions", "--since", "99999999999999999999d"], "expected a span"),
        (["regressions", "--since", "9999999d"], "at most 3653 days"),
        (["regressions", "--lookback", "523w"], "--lookback '523w': at most 3653 days"),
        (["regressions", "--since", "-5d"], "expected a span"),
        (["regressions", "--since", "٣d"], "expected a span"),
        (["triage", "latest", "--state", "open", "--since", "8760000h"], "at most 3653 days"),
    ],
)
def test_durations_are_capped(example_url: str, argv: list[str], needle: str) -> None:
    code, out = invoke(*argv, "--db", example_url)
    assert code == 2 and needle in out, out


def test_a_sweep_with_thousands_of_problems_says_how_many(tmp_path: Path) -> None:
    steps = list(range(1, 11))
    sweep = tmp_path / "many.yaml"
    sweep.write_text(
        "name: many\nmodel: m\nserver: {backend: sim, attention_backend: fa3}\n"
        f"grid: {{batch_sizes: [1], spec_modes: [v1], steps: {steps}, topk: {steps}, draft_tokens: {list(range(2, 10))}}}\n"
        "workload: {input_len: 8, output_len: 8}\n"
    )
    code, out = invoke("run", str(sweep), "--dry-run", "--db", f"sqlite:///{tmp_path}/x.db")
    assert code == 2
    assert "problem(s)" in out and "... and " in out and " more" in out
    assert out.count("  - ") == 20 and len(out) < 5_000


def test_a_huge_grid_is_refused_before_it_is_expanded(tmp_path: Path) -> None:
    """64 x 64 x 64 steps, topk and draft tokens: once 107 s and 1.2 MB of message; now one line."""
    axis = list(range(1, 65))
    sweep = tmp_path / "huge.yaml"
    sweep.write_text(
        "name: huge\nmodel: m\nserver: {backend: sim, attention_backend: fa3}\n"
        f"grid: {{batch_sizes: [1], spec_modes: [v1, v2], steps: {axis}, topk: {axis}, draft_tokens: {list(range(2, 66))}}}\n"
        "workload: {input_len: 8, output_len: 8}\n"
    )
    code, out = invoke("run", str(sweep), "--dry-run", "--db", f"sqlite:///{tmp_path}/x.db")
    assert code == 2
    assert "524,289 server configs" in out and "split the sweep" in out
    assert out.count("  - ") == 1
