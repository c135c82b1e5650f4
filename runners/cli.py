"""The `specbench` command line: one module per verb under `runners.commands`, like asv."""

from __future__ import annotations

import importlib

import typer

app = typer.Typer(
    name="specbench",
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
