"""The `specbench` command line: one module per verb under `runners.commands`, like asv.

Verbs load lazily: `specbench --help` lists them from the one-line summaries below without importing any verb,
and `specbench VERB` imports that verb's module only, so the light verbs start without pandas, SQL analysis
or Streamlit. `tests/runners/test_cli_startup.py` checks each summary against its verb's own docstring.
"""

from __future__ import annotations

import importlib
from typing import Any

import typer
from typer.core import TyperCommand, TyperGroup

# click's Context and Command: typer vendors its own click (typer._click) in recent releases and uses click
# itself in older ones, so the adapter below names neither.
Context = Any
Command = Any


class Verb:
    """A verb: the module under `runners.commands` that registers it, and the line `--help` lists."""

    def __init__(self, module: str, summary: str) -> None:
        self.module, self.summary = module, summary


# In the order of `specbench --help`. Each module exposes `register(app)`.
VERBS: dict[str, Verb] = {
    "run": Verb("run", "Run a sweep against a live SGLang server (or the stand-in) and store every point."),
    "runs": Verb(
        "runs",
        "List runs newest first: id, sweep, GPU, simulated, status, start and points (ok out of planned).",
    ),
    "export": Verb("export", "Export points for PR discussions and spreadsheets."),
    "import": Verb(
        "import_runs",
        "Merge runs from another database (e.g. a GPU host's SQLite file); a run already here gets only what it "
        "lacks (a run resumed on another host grows), never a second copy.",
    ),
    "import-results": Verb(
        "import_results",
        "Import SGLang bench_serving results (JSONL) as a run, so they sit next to specbench's own.",
    ),
    "dashboard": Verb(
        "dashboard", "Serve the dashboard: trends, sweeps, run comparisons and regressions of the database."
    ),
    "compare": Verb(
        "compare",
        "Compare two runs point by point: Δ with an interval and a verdict for every configuration.",
    ),
    "ci": Verb(
        "ci",
        "Compare a PR's run against its base run; write the PR comment; exit 1 on a regression, 2 when a run "
        "or the tool failed.",
    ),
    "regressions": Verb(
        "regressions",
        "List flagged changes: where a series shifted, by how much, why (for throughput), and its triage state.",
    ),
    "triage": Verb(
        "triage", "Acknowledge or dismiss every change of a run that shares one cause, in one go."
    ),
    "seed": Verb(
        "seed", "Write synthetic benchmark history: runs marked trigger=synthetic, sweeps named synthetic-*."
    ),
    "submit": Verb("submit", "Queue a sweep as a job."),
    "worker": Verb("worker", "Run queued sweeps on this host."),
    "jobs": Verb("jobs", "Show the job queue, the workers and their last heartbeat, and failed jobs."),
    "schedule": Verb(
        "schedule", "Sweeps on a cron schedule (UTC). Missed fire times: only the latest is enqueued."
    ),
    "scheduler": Verb(
        "scheduler", "Enqueue due scheduled sweeps (and requeue jobs of dead workers), until SIGTERM."
    ),
    "synth-model": Verb(
        "synth_model",
        "Write a synthetic DeepSeek-V3 + MTP checkpoint (FlashMLA dims) that sglang serves with EAGLE/NextN.",
    ),
    "crosscheck": Verb(
        "crosscheck",
        "Measure one server with specbench and SGLang's bench_serving, interleaved, and print both sides.",
    ),
    "profile": Verb("profile", "SGLang profiler traces: summarise speculative cycles."),
    "db": Verb(
        "db", "Database schema: migrate to the latest revision, or show it; snapshot a SQLite file in use."
    ),
}


def load_verb(name: str) -> Command:
    """The real command of one verb: its module imported now, and only it."""
    module = importlib.import_module(f"runners.commands.{VERBS[name].module}")
    holder = typer.Typer(add_completion=False, pretty_exceptions_show_locals=False)
    module.register(holder)
    return typer.main.get_group(holder).commands[name]


class LazyVerbs(TyperGroup):
    """A group whose verbs are imported when one is run, not when the CLI starts."""

    def list_commands(self, ctx: Context) -> list[str]:
        return list(VERBS)

    def get_command(self, ctx: Context, cmd_name: str) -> Command | None:
        # What help listings and completion see: the name and its summary, nothing imported.
        verb = VERBS.get(cmd_name)
        return None if verb is None else TyperCommand(cmd_name, help=verb.summary)

    def resolve_command(self, ctx: Context, args: list[str]) -> tuple[str | None, Command | None, list[str]]:
        name, command, rest = super().resolve_command(ctx, args)
        if name in VERBS:
            command = load_verb(name)
        return name, command, rest


app = typer.Typer(
    name="specbench",
    cls=LazyVerbs,
    help="Speculative-decoding benchmarks for SGLang on FlashMLA: sweep, store, compare, chart.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_show_locals=False,
)


@app.callback()
def _root() -> None:
    # A callback makes typer build a group even though no verb is registered on `app` itself.
    pass


def main() -> None:
    app()


if __name__ == "__main__":
    main()
