"""What a verb's exit status means, as in pytest: the one scheme `run`, `ci`, `compare` and the checks share.

- 0 `OK`: the tool ran and found nothing wrong.
- 1 `FINDING`: the tool ran and the measurement says something is wrong: a regression, a failed correctness
  check, or (named in `run --fail-on`) unstable points. The numbers are trustworthy; the code under test is not.
- 2 `ERROR`: there is no answer: bad input, a run that failed or stopped short, a launch every server would
  repeat (SGLang not installed), an unreachable database. Fix the setup and run again.

CI can tell "the PR made it slower" (1) from "the benchmark did not run" (2) without reading the log.
"""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    OK = 0
    FINDING = 1
    ERROR = 2
