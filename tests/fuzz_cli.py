"""The CLI fuzz corpus (issue 30 §7 and §9): hundreds of hostile command lines, run in-process against one
database, each checked for a traceback, a hang and raw control characters in what it printed.

    corpus = build_corpus(Targets(db=url, empty=empty_url, work=tmp))
    report = run_corpus(corpus, timeout_s=60)   # -> Report: cases, tracebacks, hangs, raw control output

`db` holds two measured stand-in runs with every free-text field hostile (tests/hostile.py), so read verbs
print hostile names; `empty` is an empty database for the verbs that would start work on a queued job
(worker, scheduler, seed). The families, each over many values:

- run references (`¹²³`, 100,000 characters, 2**31, `../../etc/passwd`, ...) in every verb that takes one;
- durations (`--since 99999999999999999999d`, `--lookback`, ...);
- numbers (`nan`, `inf`, `1e309`, 10**20, 2**31, `¹`, `0x10`, ...) in every numeric option;
- text (NUL, 5,000 characters, ESC and OSC 8, newlines, bidi overrides, markup, SQL and shell) in every text
  option, and hostile cron expressions;
- files: bench_serving results with every field wrong (tests/runners/test_imports.py), specbench databases
  with every column wrong, special files (/dev/zero, a FIFO, a directory, /proc/self/environ), mutated
  sweep files (tests/sweep_mutations.py) for run, submit and schedule add;
- every read verb and format over the hostile database, and hostile `--db` values.

A case passes when the command ends (within the timeout) with a message or a result, no exception escaped it,
no "Traceback" was printed, and nothing it printed holds a raw control character (tests/hostile.RAW_CONTROL).
Cases run in this process through typer's CliRunner (a subprocess per case would cost 2-3 s of imports each);
a hang is cut by SIGALRM.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import sqlite3
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType

from typer.testing import CliRunner

from db.migrate import open_database
from runners.cli import app
from tests.fixtures.bad_imports import DB_CASES, EXAMPLE, JSONL_CASES, RESULTS
from tests.hostile import RAW_CONTROL
from tests.sweep_mutations import mutated_sweeps

SWEEP_TEXT = (
    "name: fuzz\nmodel: sim-tiny\nserver: {backend: sim, sim: {instant: true, startup_s: 0}}\n"
    "grid: {batch_sizes: [1], spec_modes: [], baseline: true}\n"
    "workload: {dataset: random, input_len: 8, output_len: 4, num_prompts: 2}\nrepeats: 1\n"
)
REFS = [
    "¹²³",
    "١٢٣٤٥٦٧",
    "a" * 100_000,
    "f" * 4000,
    "0" * 4000,
    "2147483647",
    "2147483648",
    str(2**63),
    "99999999999999999999",
    "-1",
    "0",
    "",
    " ",
    "latest~",
    "latest~-1",
    "latest~99999999999",
    "latest~1",
    "%_%_%_",
    "../../etc/passwd",
    "\x1b[31m1",
    "\x1b]8;;http://e.x\x071\x1b]8;;\x07",
    "01a2",
    "ÿÿÿÿÿÿ",
    "0" * 37,
    "+1",
    "1e3",
]
DURATIONS = [
    "30d",
    "0d",
    "3653d",
    "3654d",
    "99999999999999999999d",
    "9999999d",
    "-5d",
    "5",
    "d",
    "٣d",
    "1.5d",
    "1e3d",
    "5 d",
    "5D",
    "5y",
    "",
    "\x1b[31m5d",
    "5d\u202e",
]
NUMBERS = [
    "nan",
    "inf",
    "-inf",
    "1e309",
    "-1",
    "0",
    "99999999999999999999",
    "2147483648",
    "abc",
    "¹",
    "0x10",
    "1e3",
]
TEXTS = [
    "a\x00b",
    "x" * 5000,
    "x" * 300,
    "\x1b]8;;http://e.x\x07link\x1b]8;;\x07\x1b[2J",
    "a\nb",
    "\u202eevil",
    "",
    " ",
    "[bold]x[/]",
    "%_%",
    "' OR 1=1 --",
    "../../etc/passwd",
    "${DATABASE_URL}$(id)",
    "=cmd|' /C calc'!A0",
]
CRONS = [
    "0 0 31 2 *",
    "30 2 30 2 *",
    "0 0 31 4 *",
    "31 4 31 4 *",
    "0 0 29 2 *",
    "* * * * * *",
    "61 * * * *",
    "@reboot",
    "@yearly",
    "",
    "rm -rf /",
    "*/0 * * * *",
    "0 0 * * 8",
    "0 0 0 0 0",
    "¹ * * * *",
    "1-999999999 * * * *",
    "H H * * *",
    "0 2 * * *\n0 3 * * *",
    "0 2 * * " + ",".join(["1"] * 60),
    "\x1b[31m0 2 * * *",
]
DB_VALUES = [
    "notaurl",
    "sqlite://",
    "env:",
    "env:SPECBENCH_FUZZ_NOT_SET",
    "postgresql://u:pw@127.0.0.1:1/x",
    "postgresql://u@127.0.0.1:1/x?password=pw",
    "sqlite:///{work}/no/such/dir/x.db",
    "mysql://x/y",
    "sqlite:///:memory:",
    "postgresql://127.0.0.1:1/x",
    "\x1b]8;;http://e.x\x07db",
]


@dataclass(frozen=True)
class Targets:
    db: str  # the hostile database the corpus runs against
    empty: str  # an empty database (workers, the scheduler and seed start work on what they find)
    work: Path  # where the corpus's files go, and the working directory of every case


@dataclass(frozen=True)
class Case:
    family: str
    argv: tuple[str, ...]


@dataclass
class Outcome:
    case: Case
    exit_code: int | None
    seconds: float
    traceback: str | None = None  # what escaped, or the printed traceback's last line
    hang: bool = False
    raw_control: str | None = None  # the first raw control character printed, as repr


@dataclass
class Report:
    outcomes: list[Outcome] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def tracebacks(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.traceback]

    @property
    def hangs(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.hang]

    @property
    def raw_control(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.raw_control]

    def families(self) -> Counter[str]:
        return Counter(o.case.family for o in self.outcomes)

    def exit_codes(self) -> Counter[int | None]:
        return Counter(o.exit_code for o in self.outcomes)

    def summary(self) -> str:
        return (
            f"{len(self.outcomes)} cases in {self.seconds:.0f} s: {len(self.tracebacks)} tracebacks, "
            f"{len(self.hangs)} hangs, {len(self.raw_control)} with raw control characters; exit codes "
            f"{dict(sorted(self.exit_codes().items(), key=lambda kv: str(kv[0])))}"
        )

    def failures(self) -> list[str]:
        out = []
        for o in self.tracebacks + self.hangs + self.raw_control:
            why = o.traceback or ("hang" if o.hang else f"raw control {o.raw_control}")
            out.append(f"[{o.case.family}] {_shown_argv(o.case.argv)}: {why}")
        return out


def _shown_argv(argv: tuple[str, ...]) -> str:
    return " ".join(repr(a) if len(a) < 60 else repr(a[:57]) + "..." for a in argv)


# ---- the corpus


def build_corpus(t: Targets) -> list[Case]:
    """Every case, with the files they read written under `t.work`."""
    files = _write_files(t)
    cases: list[Case] = []

    def add(family: str, *argv: str) -> None:
        cases.append(Case(family, tuple(argv)))

    db, empty, sweep = t.db, t.empty, str(files.sweep)
    comment = str(t.work / "comment.md")
    for ref in REFS:
        add("run reference", "compare", ref, "latest", "--db", db)
        add("run reference", "compare", "latest", ref, "--db", db, "--format", "json")
        add("run reference", "export", "--run", ref, "--db", db)
        add("run reference", "export", "--run", ref, "--view", "v2-vs-v1", "--db", db)
        add("run reference", "runs", "--yaml", ref, "--db", db)
        add("run reference", "triage", ref, "--state", "open", "--dry-run", "--db", db)
        add("run reference", "run", sweep, "--resume-run", ref, "--dry-run", "--db", db)
        add(
            "run reference", "ci", sweep, "--base-run", ref, "--head-run", "latest", "--db", db, "-o", comment
        )
    for span in DURATIONS:
        add("duration", "regressions", "--since", span, "--db", db)
        add("duration", "regressions", "--lookback", span, "--db", db, "--format", "json")
        add("duration", "triage", "latest", "--state", "open", "--dry-run", "--since", span, "--db", db)
    numeric = [
        ("jobs", "--limit", "{v}", "--db", db),
        ("jobs", "--cancel", "{v}", "--db", db),
        ("schedule", "remove", "{v}", "--db", db),
        ("submit", sweep, "--priority", "{v}", "--db", db),
        ("submit", sweep, "--max-attempts", "{v}", "--db", db),
        ("schedule", "add", sweep, "--cron", "0 2 * * *", "--priority", "{v}", "--db", db),
        ("regressions", "--window", "{v}", "--db", db),
        ("regressions", "--pvalue", "{v}", "--db", db),
        ("regressions", "--min-magnitude", "{v}", "--db", db),
        ("compare", "1", "2", "--threshold", "{v}", "--db", db),
        ("compare", "1", "2", "--confidence", "{v}", "--db", db),
        ("runs", "--limit", "{v}", "--db", db),
        ("profile", "resummarize", "--run", "{v}", "--db", db),
        ("import-results", str(RESULTS), "--gpu-count", "{v}", "--db", db),
        ("run", sweep, "--dry-run", "--deadline-s", "{v}", "--db", db),
        ("scheduler", "--once", "--interval-s", "{v}", "--db", empty),
        ("worker", "--once", "--poll-interval", "{v}", "--db", empty, "--log-dir", str(t.work / "logs")),
        ("worker", "--once", "--lease-s", "{v}", "--db", empty, "--log-dir", str(t.work / "logs")),
        ("worker", "--once", "--db-outage-limit-s", "{v}", "--db", empty, "--log-dir", str(t.work / "logs")),
        ("seed", "--points", "{v}", "--db", empty),
        ("seed", "--points", "10", "--seed", "{v}", "--db", empty),
        ("profile", "summarize", str(files.not_a_trace), "--tpot-ms", "{v}"),
        ("synth-model", str(t.work / "synth"), "--hidden", "{v}"),
        ("synth-model", str(t.work / "synth"), "--vocab", "{v}"),
        ("crosscheck", "--url", "http://127.0.0.1:1", "--rounds", "{v}"),
    ]
    for value in NUMBERS:
        for template in numeric:
            add("number", *(value if a == "{v}" else a for a in template))
    textual = [
        ("runs", "--name", "{v}", "--db", db),
        ("runs", "--gpu", "{v}", "--db", db),
        ("runs", "--status", "{v}", "--db", db),
        ("run", sweep, "--dry-run", "--label", "{v}", "--db", db),
        ("run", sweep, "--dry-run", "--trigger", "{v}", "--db", db),
        ("run", sweep, "--dry-run", "--client-cpus", "{v}", "--db", db),
        ("run", sweep, "--dry-run", "--gpus", "{v}", "--db", db),
        ("submit", sweep, "--label", "{v}", "--db", db),
        ("submit", sweep, "--requires", "{v}", "--db", db),
        ("import-results", str(RESULTS), "--model", "{v}", "--db", db),
        ("import-results", str(RESULTS), "--gpu", "{v}", "--db", db),
        ("import-results", str(RESULTS), "--name", "{v}", "--db", db),
        ("import", str(files.source), "--sweep", "{v}", "--db", db),
        ("triage", "latest", "--state", "open", "--dry-run", "--note", "{v}", "--db", db),
        ("triage", "latest", "--state", "open", "--dry-run", "--cause", "{v}", "--db", db),
        ("regressions", "--metric", "{v}", "--db", db),
        ("compare", "1", "2", "--metric", "{v}", "--db", db),
        ("export", "--view", "{v}", "--db", db),
        ("jobs", "--status", "{v}", "--db", db),
        ("worker", "--once", "--gpus", "{v}", "--db", empty, "--log-dir", str(t.work / "logs")),
        ("worker", "--once", "--labels", "{v}", "--db", empty, "--log-dir", str(t.work / "logs")),
        ("runs", "--yaml", "latest", "--db", "{v}"),
    ]
    for value in TEXTS:
        for template in textual:
            add("text", *(value if a == "{v}" else a for a in template))
    for cron in CRONS:
        add("cron", "schedule", "add", sweep, "--cron", cron, "--db", db)
    for path in files.results:
        add("bench_serving file", "import-results", str(path), "--db", db)
    for path in files.databases:
        add("database file", "import", str(path), "--db", db)
    for path in files.sweeps:
        add("sweep file", "run", str(path), "--dry-run", "--db", db)
        add("sweep file", "submit", str(path), "--db", db)
        add("sweep file", "schedule", "add", str(path), "--cron", "0 3 * * *", "--db", db)
    for path in files.special:
        add("special file", "run", str(path), "--dry-run", "--db", db)
        add("special file", "import-results", str(path), "--db", db)
        add("special file", "import", str(path), "--db", db)
        add("special file", "profile", "summarize", str(path))
    for argv in _reads(db, t.work):
        add("read", *argv)
    for value in DB_VALUES:
        value = value.replace("{work}", str(t.work))  # never a path outside the corpus's own directory
        add("--db", "runs", "--db", value)
        add("--db", "jobs", "--db", value)
    return cases


def _reads(db: str, work: Path) -> Iterator[tuple[str, ...]]:
    """Every read verb and format over the hostile database."""
    yield from (
        ("runs", "--db", db),
        ("runs", "--db", db, "--format", "json"),
        ("runs", "--db", db, "--format", "csv"),
        ("runs", "--db", db, "--real"),
        ("runs", "--db", db, "--simulated", "--limit", "1"),
        ("runs", "--yaml", "1", "--db", db),
        ("jobs", "--db", db),
        ("jobs", "--db", db, "--format", "json"),
        ("schedule", "list", "--db", db),
        ("schedule", "list", "--db", db, "--format", "json"),
        ("regressions", "--db", db, "--since", "3650d", "--include-improvements", "--include-dismissed"),
        ("regressions", "--db", db, "--since", "3650d", "--format", "json"),
        ("compare", "--db", db),
        ("db", "current", "--db", db),
        ("scheduler", "--once", "--db", db),
        ("profile", "resummarize", "--run", "2", "--db", db),
        ("export", "--all-runs", "--all-status", "--db", db),
        ("triage", "2", "--state", "acknowledged", "--dry-run", "--since", "3650d", "--db", db),
    )
    for fmt in ("md", "comment", "csv", "json"):
        yield ("compare", "1", "2", "--db", db, "--format", fmt)
    for fmt in ("csv", "json", "md", "bench-serving-json"):
        yield ("export", "--run", "1", "--all-status", "--db", db, "--format", fmt)
    for view in ("v2-vs-v1", "windows"):
        for fmt in ("csv", "json", "md"):
            yield ("export", "--run", "2", "--view", view, "--db", db, "--format", fmt)
    yield ("export", "--run", "1", "--db", db, "-o", str(work / "out" / "x.csv"))


@dataclass
class Files:
    sweep: Path
    results: list[Path]
    source: Path
    databases: list[Path]
    sweeps: list[Path]
    special: list[Path]
    not_a_trace: Path


def _write_files(t: Targets) -> Files:
    work = t.work
    work.mkdir(parents=True, exist_ok=True)
    sweep = work / "fuzz.yaml"
    sweep.write_text(SWEEP_TEXT)
    results_dir = work / "results"
    results_dir.mkdir(exist_ok=True)
    results = []
    for i, (_, text, _) in enumerate(JSONL_CASES):
        path = results_dir / f"case{i:02}.jsonl"
        path.write_text(text)
        results.append(path)
    good = json.loads(RESULTS.read_text().splitlines()[0])
    extra = {
        "top-level array": "[1, 2]\n",
        "completed 1e400": json.dumps(good).replace(
            f'"completed": {good["completed"]}', '"completed": 1e400'
        ),
        "empty": "",
        "blank lines": "\n\n\n",
        "a 2 MB line": '{"completed": ' + "9" * 2_000_000 + "}\n",
        "nested objects": '{"a":' * 50_000 + "1" + "}" * 50_000 + "\n",
        "ESC in model": json.dumps({**good, "server_info": {"model_path": "\x1b]8;;http://e.x\x07m"}}),
    }
    for name, text in extra.items():
        path = results_dir / f"{name.replace(' ', '_')}.jsonl"
        path.write_text(text)
        results.append(path)
    (results_dir / "not_utf8.jsonl").write_bytes(
        b'{"completed": 1, "output_throughput": 1, "tag": "\xff\xfe"}\n'
    )
    results.append(results_dir / "not_utf8.jsonl")
    source = _source_database(t)
    databases = []
    db_dir = work / "databases"
    db_dir.mkdir(exist_ok=True)
    for i, (_, sql, _) in enumerate(DB_CASES):
        path = db_dir / f"case{i:02}.db"
        shutil.copy(source, path)
        with sqlite3.connect(path) as conn:
            conn.execute(sql)
        databases.append(path)
    empty_db = db_dir / "no_tables.db"
    sqlite3.connect(empty_db).close()
    text_file = db_dir / "text.db"
    text_file.write_text("SQLite format 3\x00 but not really")
    databases += [empty_db, text_file]
    sweeps_dir = work / "sweeps"
    sweeps_dir.mkdir(exist_ok=True)
    sweeps = []
    for i, (_, raw) in enumerate(mutated_sweeps(n=40, seed=30)):
        path = sweeps_dir / f"m{i:02}.yaml"
        path.write_bytes(raw)
        sweeps.append(path)
    special_dir = work / "special"
    special_dir.mkdir(exist_ok=True)
    fifo = special_dir / "fifo"
    if not fifo.exists():
        os.mkfifo(fifo)
    not_a_trace = special_dir / "not_a_trace.json"
    not_a_trace.write_text('{"traceEvents": 1}')
    special = [
        Path("/dev/zero"),
        Path("/dev/null"),
        Path("/proc/self/environ"),
        fifo,
        special_dir,
        special_dir / "missing",
        not_a_trace,
    ]
    return Files(sweep, results, source, databases, sweeps, special, not_a_trace)


def _source_database(t: Targets) -> Path:
    """A real specbench database (the bundled H200 example, migrated to this schema) for `import`, and the base
    every broken source copies."""
    path = t.work / "source.db"
    if not path.exists():
        shutil.copy(EXAMPLE, path)
        open_database(f"sqlite:///{path}").dispose()
    return path


# ---- running it


class CaseTimeout(BaseException):
    """A case ran past its time: a hang. A BaseException, so that no `except Exception` in a verb swallows it."""


@contextmanager
def _alarm(seconds: float) -> Iterator[None]:
    def fire(_signum: int, _frame: FrameType | None) -> None:
        raise CaseTimeout()

    previous = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def run_case(runner: CliRunner, case: Case, timeout_s: float) -> Outcome:
    # The verbs set up logging on first use, bound to that case's (then closed) stderr: start afresh. The
    # scheduler and workers install their own SIGTERM/SIGINT handlers: put this process's back afterwards.
    logging.root.handlers.clear()
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    started = time.monotonic()
    try:
        with _alarm(timeout_s):
            res = runner.invoke(app, list(case.argv))
    except CaseTimeout:
        return Outcome(case, None, time.monotonic() - started, hang=True)
    finally:
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
    outcome = Outcome(case, res.exit_code, time.monotonic() - started)
    exc = res.exception
    if exc is not None and not isinstance(exc, SystemExit):
        outcome.traceback = f"{type(exc).__name__}: {str(exc)[:200]}"
    elif "Traceback (most recent call last)" in res.output or "Logging error" in res.output:
        outcome.traceback = res.output.strip().splitlines()[-1][:200]
    raw = RAW_CONTROL.search(res.output)
    if raw:
        outcome.raw_control = repr(raw.group())
    return outcome


def run_corpus(cases: list[Case], work: Path, *, timeout_s: float = 60.0) -> Report:
    """Run every case from `work` (relative paths, a default database and logs land there)."""
    report = Report()
    runner = CliRunner()
    here = Path.cwd()
    env = {k: os.environ.pop(k) for k in ("DATABASE_URL",) if k in os.environ}
    started = time.monotonic()
    os.chdir(work)
    try:
        for case in cases:
            report.outcomes.append(run_case(runner, case, timeout_s))
    finally:
        os.chdir(here)
        os.environ.update(env)
        logging.root.handlers.clear()
    report.seconds = time.monotonic() - started
    return report
