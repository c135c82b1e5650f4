"""One GPU shared by stand-in servers (`sim.shared_gpu`): each live server claims mem_fraction_static x GPU
memory in the run's SPECBENCH_SIM_GPU_LEDGER file, and one that does not fit fails to start, as on SGLang.
"""

import atexit
import fcntl
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

LEDGER_ENV = "SPECBENCH_SIM_GPU_LEDGER"


class GpuMemoryError(RuntimeError):
    """Not enough free GPU memory for this server next to the others."""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@contextmanager
def _locked(ledger: Path) -> Iterator[dict[str, float]]:
    """The ledger's claims (pid -> GB) under an exclusive lock, written back unless the block raises."""
    with open(ledger.with_suffix(".lock"), "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            entries = json.loads(ledger.read_text()) if ledger.exists() else {}
        except ValueError:
            entries = {}
        yield entries
        ledger.write_text(json.dumps(entries))


def claim(path: str | os.PathLike[str], claim_gb: float, total_gb: float) -> None:
    """Record this process's claim, or raise GpuMemoryError if the live claims leave too little."""
    ledger = Path(path)
    ledger.parent.mkdir(parents=True, exist_ok=True)
    with _locked(ledger) as entries:
        live = {pid: gb for pid, gb in entries.items() if _alive(int(pid)) and int(pid) != os.getpid()}
        used = sum(float(gb) for gb in live.values())
        if used + claim_gb > total_gb:
            raise GpuMemoryError(
                f"RuntimeError: Not enough memory. Please try to increase --mem-fraction-static. "
                f"(this server needs {claim_gb:.1f} GB, {total_gb - used:.1f} GB of {total_gb:.1f} GB free; "
                f"{len(live)} other server(s) on this GPU)"
            )
        entries.clear()
        entries.update(live)
        entries[str(os.getpid())] = claim_gb
    atexit.register(release, ledger)


def release(path: str | os.PathLike[str]) -> None:
    with _locked(Path(path)) as entries:
        entries.pop(str(os.getpid()), None)
