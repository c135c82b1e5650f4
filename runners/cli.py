"""The `specbench` command line: one module per verb under `runners.commands`, like asv."""

from __future__ import annotations

import importlib
from typing import Any

import typer
from typer.core import TyperGroup

from runners.common import fail

# No argument a person types is longer than a path may be; a longer one is pasted by accident or by a script
# gone wrong, and would reach queries, LIKE patterns and messages whole.
MAX_ARGUMENT_CHARS = 4096


class _BoundedArguments(TyperGroup):
    """Every verb's arguments checked before any is parsed: no NUL byte (no database column or file name
    holds one, and PostgreSQL refuses it mid-query), none longer than MAX_ARGUMENT_CHARS."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        for i, arg in enumerate(args, 1):
            # Name the option a value belongs to ("--model"), not only its position: that is what the user typed.
            what = (
                f"{args[i - 2]} (argument {i})" if i > 1 and args[i - 2].startswith("--") else f"argument {i}"
            )
            if "\x00" in arg:
                fail(f"{what} holds a NUL byte; at most printable text")
            if len(arg) > MAX_ARGUMENT_CHARS:
                fail(f"{what} is {len(arg):,} characters long; at most {MAX_ARGUMENT_CHARS:,}")
        return super().parse_args(ctx, args)


app = typer.Typer(
    name="specbench",
    cls=_BoundedArguments,
    help="Speculative-decoding benchmarks for SGLang on FlashMLA: sweep, store, compare, chart.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_show_locals=False,
)


@app.callback()
def _on_start() -> None:
    """Every specbench command first stops the servers a dead launcher on this host left running (their
    watchdog died too), not only a worker or a run (runners/host_recovery.py)."""
    from runners.common import err_console  # the CLI's own console; imported here to keep start-up light
    from runners.host_recovery import reap_servers

    reap_servers(lambda line: err_console.print(f"note: {line}", style="yellow", markup=False))


# Each module exposes `register(app)`; the order here is the order of `specbench --help`.
COMMAND_MODULES = [
    "run",
    "runs",
    "export",
    "import_runs",
    "import_results",
    "dashboard",
    "compare",
    "ci",
    "gate",
    "regressions",
    "triage",
    "seed",
    "submit",
    "worker",
    "jobs",
    "schedule",
    "scheduler",
    "synth_model",
    "crosscheck",
    "profile",
    "db",
]


def _register_all() -> None:
    for name in COMMAND_MODULES:
        module = importlib.import_module(f"runners.commands.{name}")
        module.register(app)


_register_all()


def main() -> None:
    app()


if __name__ == "__main__":
    main()
