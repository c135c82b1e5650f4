"""What a verb's exit status means, as in pytest: the one scheme `run`, `ci`, `compare` and the checks share.

- 0 `OK`: the tool ran and found nothing wrong.
- 1 `FINDING`: the measurement says something is wrong: a regression, a failed correctness check, or (named
  in `run --fail-on`) unstable points. The numbers are trustworthy; the code under test is not.
- 2 `ERROR`: there is no answer: bad input, a run that failed or stopped short, a launch every server would
  repeat (SGLang not installed), an unreachable database. Fix the setup and run again.

docs/reference/cli.md#exit-codes says, per verb, what a finding is.
"""

import contextlib
import os
import sys
from collections.abc import Iterator
from enum import IntEnum
from typing import NoReturn


class ExitCode(IntEnum):
    OK = 0
    FINDING = 1
    ERROR = 2


def reader_gone(code: int | str | None = ExitCode.OK) -> NoReturn:
    """The reader of stdout went away (`| head`): exit quietly with `code`, stdout on /dev/null."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    raise SystemExit(code)


@contextlib.contextmanager
def answered(code: ExitCode) -> Iterator[None]:
    """Print a verb's answer, which is `code`: if the reader goes away meanwhile, the verb still exits so."""
    try:
        yield
    except BrokenPipeError:
        reader_gone(code)
