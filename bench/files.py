"""Reading a file a user or job names: regular, bounded, opened without blocking (issue 30 §9, issue 35).
/dev/zero once filled memory, a FIFO blocks forever, /proc and /sys files claim size 0. So it is read only
when regular, at most `cap`, outside /proc, /sys and /dev; opened O_NONBLOCK, checked again on what was
opened, and read no further than `cap`. Workload files, sweeps and config.json go through here."""

import os
import stat
from pathlib import Path

# Pseudo file systems: their files claim to be regular, with a size of 0, and are not data.
PSEUDO_ROOTS = ("/proc", "/sys", "/dev")
_NOT_REGULAR = "not a regular file (a directory, FIFO, socket or device is never read)"


class FileReadError(ValueError):
    """A named file that is not read; the message names it and says why."""


def regular_file_problem(path: str | Path, cap: int, what: str = "a file") -> str | None:
    """Why `path` cannot be read as `what` (not regular, over `cap`, unreadable), from metadata alone."""
    real = os.path.realpath(path)
    if any(real == root or real.startswith(root + "/") for root in PSEUDO_ROOTS):
        return f"{path}: not a regular file (a device or a /proc, /sys file is never read)"
    try:
        st = os.stat(real)
    except OSError as e:
        return f"{path}: cannot read ({e.strerror or e})"
    if not stat.S_ISREG(st.st_mode):
        return f"{path}: {_NOT_REGULAR}"
    if st.st_size > cap:
        return f"{path}: {st.st_size:,} bytes, more than the {cap:,}-byte limit of {what}"
    return None


def read_regular_file(path: str | Path, cap: int, what: str = "a file") -> bytes:
    """The bytes of `path`, a regular file of at most `cap` bytes; FileReadError otherwise."""
    if problem := regular_file_problem(path, cap, what):
        raise FileReadError(problem)
    try:
        with os.fdopen(os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC), "rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                raise FileReadError(f"{path}: {_NOT_REGULAR}")
            data = f.read(cap + 1)
    except OSError as e:
        raise FileReadError(f"{path}: cannot read ({e.strerror or e})") from None
    if len(data) > cap:
        raise FileReadError(f"{path}: more than the {cap:,}-byte limit of {what}")
    return data
