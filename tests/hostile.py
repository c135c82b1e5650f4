"""A database whose every stored text field is hostile, for the rendering tests (CSV, terminal, dashboard) and
the fuzz corpus (issue 30 §6 and §9).

    url = hostile_database(measured_runs, tmp_path)   # two real stand-in runs of one grid, then poisoned

Two small runs are measured on the stand-in (instant, v1 and v2, a baseline; once per test session, by the
`measured_runs` fixture), a job, a worker, a schedule, a
triage note and a profile row are added, and then every free-text column (model, sweep name, label, host,
GPU, versions, error reasons, log tails, triage notes, paths) is overwritten with `HOSTILE`, cut to its
column's length: a formula for spreadsheets, Markdown images and links, HTML, Streamlit's own markup, and
terminal control sequences (ESC, OSC 8 hyperlinks, BEL, a bidi override).
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy import Engine, String, Text, insert, select, update

from analysis.regressions import recent_changes
from db.migrate import open_database
from db.models import Base, Job, Point, Profile, Run, Sample, Schedule, ServerInstance, Triage, Worker
from synthetic.history import SMALL_SHAPE
from synthetic.history.seed import seed_history
from tests.fixtures.cli import run_cli
from tests.fixtures.db import copy_sqlite

EVIL_HOST = "evil.invalid"
# Starts with a formula (with a comma and quotes, so a naive header line would split it), then terminal control
# sequences (an OSC 8 hyperlink, BEL, a colour, a bidi override, a C1 CSI), Markdown, HTML and Streamlit markup.
HOSTILE = (
    f'=HYPERLINK("http://{EVIL_HOST}/f","x"),=1+1 '
    f"\x1b]8;;http://{EVIL_HOST}/o\x07O\x1b]8;;\x07\x1b[31mR\u202eZ\x9b2J "
    f"![i](http://{EVIL_HOST}/t.png) [l](http://{EVIL_HOST}/l) <img src=http://{EVIL_HOST}/h.png> "
    f"http://{EVIL_HOST}/auto www.{EVIL_HOST} :red[r] :material/home: $x^2$ **b**"
)
# The free-text columns an operator, a sweep or an import can fill; structural columns (ids, uids, keys,
# statuses, fingerprints, the sweep YAML) keep their values so that every page and verb still works.
TEXT_COLUMNS: dict[type[Base], tuple[str, ...]] = {
    Run: (
        "sweep_name",
        "label",
        "error",
        "model",
        "model_identity",
        "sglang_version",
        "sglang_commit",
        "sgl_kernel_version",
        "flashinfer_version",
        "flash_mla_source",
        "torch_version",
        "cuda_version",
        "driver_version",
        "gpu_name",
        "host",
        "specbench_version",
        "git_commit",
    ),
    Point: ("reason", "model", "draft_model", "gpu_name"),
    Sample: ("reason",),
    ServerInstance: ("label", "error", "log_tail", "spec_mode_detail", "log_path"),
    Job: ("sweep_name", "label", "last_error"),
    Worker: ("host", "gpu_name"),
    Triage: ("note",),
    Profile: ("host", "path", "error"),
    Schedule: ("label", "sweep_path"),
}
# What a spreadsheet would run: a cell starting (after spaces) with = + - @ or a tab or carriage return, unless it
# is a plain number.
_FORMULA = re.compile(r"^[ ]*[=+\-@\t\r]")
_NUMBER = re.compile(r"[ ]*[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?[ ]*")
# Raw control characters a terminal would act on (newline, tab and carriage return aside).
RAW_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def fitted(length: int | None) -> str:
    return HOSTILE if length is None else HOSTILE[:length]


def sim_grid_sweep(name: str, rate: float) -> str:
    return (
        f"name: {name}\nmodel: sim-tiny\nserver:\n  backend: sim\n  attention_backend: flashmla\n"
        f"  sim: {{acceptance_rate: {rate}, seed: 1, instant: true, startup_s: 0}}\n"
        "grid: {batch_sizes: [1, 2], spec_modes: [v1, v2], steps: [2], topk: [1], baseline: true}\n"
        "workload: {input_len: 16, output_len: 16, num_prompts: 4}\nrepeats: 2\n"
        "measure: {drift_check: false}\n"
    )


def measure_runs(path: Path) -> None:
    """Two stand-in runs of one grid (so Compare and v2-vs-v1 have something), measured by the real CLI into the
    SQLite file `path`. The `measured_runs` fixture (tests/fixtures/db.py) does this once per test session."""
    for name, rate in (("base", 0.7), ("cand", 0.4)):
        sweep = path.parent / f"{name}.yaml"
        sweep.write_text(sim_grid_sweep(name, rate))
        res = run_cli(
            "run", str(sweep), "--db", f"sqlite:///{path}", "--no-progress", "--log-dir", str(path.parent)
        )
        assert res.returncode == 0, res.stdout + res.stderr


def measured_database(runs: Path, tmp: Path, url: str | None = None) -> str:
    """The measured runs (`measured_runs`) in a database of the caller's own: a copy at `tmp`, or imported by
    the real CLI into `url` (a fresh SQLite or PostgreSQL database)."""
    tmp.mkdir(parents=True, exist_ok=True)
    if url is None:
        return copy_sqlite(runs, tmp / "hostile.db")
    res = run_cli("import", str(runs), "--db", url)
    assert res.returncode == 0, res.stdout + res.stderr
    return url


def poison(engine: Engine) -> None:
    """Add a job, a worker, a schedule, a triage note and a profile, then make every free-text field hostile."""
    now = datetime.now(UTC)
    with engine.begin() as c:
        run_id, sweep_yaml = c.execute(select(Run.id, Run.sweep_yaml).order_by(Run.id.desc())).first()  # type: ignore[misc]
        point_id, fingerprint = c.execute(
            select(Point.id, Point.fingerprint).where(Point.run_id == run_id).order_by(Point.id)
        ).first()  # type: ignore[misc]
        c.execute(
            insert(Job).values(
                sweep_name="x", sweep_yaml=sweep_yaml, status="failed", attempts=3, last_error="x", label="x"
            )
        )
        c.execute(insert(Job).values(sweep_name="x", sweep_yaml=sweep_yaml, status="queued", label="x"))
        c.execute(
            insert(Worker).values(
                id="w1", host="x", pid=1, gpu_name="x", gpu_count=1, status="busy", last_heartbeat=now
            )
        )
        c.execute(
            insert(Schedule).values(cron="0 2 * * *", sweep_yaml=sweep_yaml, label="x", last_fire_time=now)
        )
        c.execute(
            insert(Triage).values(
                fingerprint=fingerprint,
                metric="output_throughput",
                run_id=run_id,
                state="acknowledged",
                note="x",
            )
        )
        for mode, status in (("v1", "ok"), ("v2", "ok"), ("v1", "failed")):
            # A v1/v2 pair (the Profiles page draws both sides) whose summary carries a hostile warning.
            c.execute(
                insert(Profile).values(
                    run_id=run_id,
                    point_id=point_id,
                    spec_mode=mode,
                    batch_size=1,
                    activities=["GPU"],
                    num_steps=4,
                    tp_rank=0,
                    status=status,
                    host="x",
                    path="/nonexistent/x.trace.json.gz",
                    error="x",
                    summary={"cycles": 3, "distortion": {"warning": HOSTILE}},
                )
            )
        for model, columns in TEXT_COLUMNS.items():
            table = model.__table__
            values = {}
            for name in columns:
                col_type = table.c[name].type
                assert isinstance(col_type, String | Text), (model, name)
                values[name] = fitted(getattr(col_type, "length", None))
            c.execute(update(model).values(**values))


def hostile_database(runs: Path, tmp: Path, url: str | None = None, *, history: bool = False) -> str:
    """The two measured stand-in runs (`measured_runs`), poisoned, in a database of the caller's own (a copy at
    `tmp`, or `url`); `history` adds seeded history ending now, so that change points are flagged (Overview,
    Trends, triage) before the poisoning reaches its runs too."""
    url = measured_database(runs, tmp, url)
    engine = open_database(url)
    try:
        if history:
            seed_history(engine, 400, shape=SMALL_SHAPE, end=datetime.now(UTC), seed=4)
            # Triage notes on flagged changes, so that pages showing changes show notes (poisoned below).
            with engine.begin() as c:
                for fp, run_id in flagged(engine)[:5]:
                    c.execute(
                        insert(Triage).values(
                            fingerprint=fp,
                            metric="output_throughput",
                            run_id=run_id,
                            state="acknowledged",
                            note="x",
                        )
                    )
        poison(engine)
    finally:
        engine.dispose()
    return url


def flagged(engine: Engine) -> list[tuple[str, int]]:
    """(fingerprint, run id) of each change `specbench regressions` lists, newest first."""
    changes = recent_changes(engine, "output_throughput")
    return [(str(fp), int(r)) for fp, r in zip(changes["fingerprint"], changes["run_id"], strict=True)]


def csv_cells(text: str) -> Iterator[str]:
    """Every cell as a spreadsheet splits the text (comma-separated, quotes honoured), `#` lines included."""
    for row in csv.reader(io.StringIO(text)):
        yield from row


def formula_cells(text: str) -> list[str]:
    """The cells of a CSV text that a spreadsheet would evaluate."""
    return [c for c in csv_cells(text) if _FORMULA.match(c) and not _NUMBER.fullmatch(c)]
