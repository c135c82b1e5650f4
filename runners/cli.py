"""The `specbench` command line: one module per verb under `runners.commands`, like asv.

Verbs load lazily: `specbench --help` lists them from the one-line summaries below without importing any verb,
and `specbench VERB` imports that verb's module only, so the light verbs start without pandas, SQL analysis
or Streamlit. `tests/runners/test_cli_startup.py` checks each summary against its verb's own docstring.
"""

import gc
import importlib
import os
import sys
from typing import Any

import typer
from typer.core import TyperCommand, TyperGroup

# typer vendors its own click in recent releases, so the adapter below names neither.
Context = Any
Command = Any


class Verb:
    """A verb: the module under `runners.commands` that defines it, the line `--help` lists, and the name there of
    its command function (or Typer group of subcommands), by default the module's own."""

    def __init__(self, module: str, summary: str, command: str | None = None) -> None:
        self.module, self.summary, self.command = module, summary, command or module


# In the order of `specbench --help`.
VERBS: dict[str, Verb] = {
    "run": Verb("run", "Run a sweep against a live SGLang server (or the stand-in) and store every point."),
    "runs": Verb(
        "runs",
        "List runs newest first: id, sweep, GPU, simulated, status, start, points (ok out of planned) and, for a "
        "run measured in several parts, how many and on which hosts.",
    ),
    "export": Verb("export", "Export points for PR discussions and spreadsheets."),
    "import": Verb(
        "import_runs",
        "Merge runs from another database (e.g. a GPU host's SQLite file); a run already here gets only what it "
        "lacks (a run resumed on another host grows), never a second copy. Every row is checked first: a value "
        "this schema cannot hold refuses the whole import, naming its table, row and column.",
    ),
    "import-results": Verb(
        "import_results",
        "Import SGLang bench_serving results (JSONL) as a run, so they sit next to specbench's own. Every line is "
        "checked first: a field of the wrong type or out of range refuses the whole file, naming line and field.",
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
    "gate": Verb("gate", "Judge a run's stored correctness answers again and print each launch's verdict."),
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
        "schedule",
        "Sweeps on a cron schedule (UTC). Missed fire times: only the latest is enqueued.",
        "schedule_app",
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
    "profile": Verb("profile", "SGLang profiler traces: summarise speculative cycles.", "profile_app"),
    "db": Verb(
        "db",
        "Database schema: migrate to the latest revision, or show it; snapshot a SQLite file in use.",
        "db_app",
    ),
}


def load_verb(name: str) -> Command:
    """The real command of one verb: its module imported now, and only it."""
    verb = VERBS[name]
    command = getattr(importlib.import_module(f"runners.commands.{verb.module}"), verb.command)
    if not gc.isenabled():  # main() held the collector off over the imports: what they made lives on, frozen
        gc.freeze()
        gc.enable()
    holder = typer.Typer(add_completion=False, pretty_exceptions_show_locals=False)
    if isinstance(command, typer.Typer):
        holder.add_typer(command, name=name)
    else:
        holder.command(name)(command)
    return typer.main.get_group(holder).commands[name]


# No argument a person types is longer than a path may be.
MAX_ARGUMENT_CHARS = 4096


class LazyVerbs(TyperGroup):
    """A group whose verbs are imported when run; arguments with a NUL byte or too long are refused first."""

    def parse_args(self, ctx: Context, args: list[str]) -> list[str]:
        for i, arg in enumerate(args, 1):
            if "\x00" in arg or len(arg) > MAX_ARGUMENT_CHARS:
                from runners.common import fail  # only on bad input: --help starts without it

                # Name the option a value belongs to ("--model"), not only its position: what the user typed.
                what = (
                    f"{args[i - 2]} (argument {i})"
                    if i > 1 and args[i - 2].startswith("--")
                    else f"argument {i}"
                )
                if "\x00" in arg:
                    fail(f"{what} holds a NUL byte; at most printable text")
                fail(f"{what} is {len(arg):,} characters long; at most {MAX_ARGUMENT_CHARS:,}")
        result: list[str] = super().parse_args(ctx, args)
        return result

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

    def invoke(self, ctx: Context) -> Any:
        try:
            return super().invoke(ctx)
        except BrokenPipeError:  # click would exit 1 for it: a reader that stopped reading is no error
            from runners.exit_codes import reader_gone

            reader_gone()
        finally:
            if common := sys.modules.get("runners.common"):  # only a verb that opened a database loaded it
                common.close_verb_engines()


app = typer.Typer(
    name="specbench",
    cls=LazyVerbs,
    help="Speculative-decoding benchmarks for SGLang on FlashMLA: sweep, store, compare, chart.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_show_locals=False,
)


@app.callback()
def _on_start() -> None:
    """Every command first stops servers a dead launcher on this host left running."""
    from runners.common import err_console  # the CLI's own console; imported here to keep start-up light
    from runners.host_recovery import reap_servers

    reap_servers(lambda line: err_console.print(f"note: {line}", style="yellow", markup=False))


def main() -> None:
    """Exit codes per runners/exit_codes.py: a closed pipe is 0, a bug 2 in one line (SPECBENCH_DEBUG=1)."""
    from runners.exit_codes import reader_gone

    gc.disable()  # until load_verb: collections under the growing imports took ~0.25 s of a worker's start
    try:
        app()
    except SystemExit as done:
        try:
            sys.stdout.flush()  # what is still buffered goes now, while a closed pipe can still be told apart
        except BrokenPipeError:
            reader_gone(done.code)
        raise done
    except BrokenPipeError:
        reader_gone()
    except Exception as e:
        if os.environ.get("SPECBENCH_DEBUG") == "1":
            raise
        from analysis.text import printable  # the message may quote stored or typed text

        line = printable(" ".join(str(e).split())[:300])
        print(
            f"error: unexpected {type(e).__name__}: {line} (a bug in specbench; SPECBENCH_DEBUG=1 shows where)",
            file=sys.stderr,
        )
        raise SystemExit(2) from None


if __name__ == "__main__":
    main()
