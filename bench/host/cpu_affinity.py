"""CPU lists ("2-7,10") and pinning to them: a launched server's whole process tree, or the runner itself. On
an H200 a speculative server is bound by one host core (its scheduler at 100%), and cores ran Python up to 2x
apart; pinning the server (`server.cpu_affinity`) and the client (`run --client-cpus`) takes the neighbours
out (docs/guide/gpu-hosts.md, "Pinning CPUs"). Linux only (elsewhere a clear error). Affinity is per thread
and inherited: pinning a process pins every thread it has now."""

import contextlib
import itertools
import os
import re
import sys
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field

import psutil

from bench.host.processes import process_tree

MAX_CPU = 8191  # the kernel's largest NR_CPUS (CONFIG_MAXSMP): more is a typo; a range up to it stays small
MAX_TEXT = 50_000  # longer is no CPU list someone typed (8192 CPUs as single numbers fit in ~40k)
EXPECTED = 'expected a Linux CPU list such as "2-7,10", or a list of CPU numbers such as [2, 3]'
_ITEM = re.compile(r"([0-9]+)(?:-([0-9]+))?")  # ASCII digits only: str.isdigit() also takes "²"

CpuList = tuple[int, ...]  # sorted, distinct


class AffinityError(RuntimeError):
    """A pin that cannot be applied on this host (not Linux, a CPU it lacks, no permission)."""


def parse_cpu_list(value: object) -> CpuList:
    """`"2-7,10"`, `[2, 3]` or `3` as sorted, distinct CPUs; ValueError says which part is wrong."""
    if isinstance(value, str):
        return _parse_text(value)
    if isinstance(value, int) and not isinstance(value, bool):
        value = [value]  # YAML reads `cpu_affinity: 3` as a number: one CPU, as "3" would be
    if isinstance(value, list | tuple):
        if not value:
            raise ValueError(f"must not be empty; {EXPECTED}")
        for x in value:
            if isinstance(x, bool) or not isinstance(x, int):
                raise ValueError(f"{x!r} is not a CPU number; {EXPECTED}")
            if not 0 <= x <= MAX_CPU:
                raise ValueError(f"CPU {x} is out of range (0 to {MAX_CPU})")
        return tuple(sorted(set(value)))
    raise ValueError(f"{EXPECTED}, not {type(value).__name__}")


def _parse_text(text: str) -> CpuList:
    if len(text) > MAX_TEXT:
        raise ValueError(f"longer than {MAX_TEXT:,} characters")
    if not text.strip():
        raise ValueError(f"must not be empty; {EXPECTED}")
    cpus: set[int] = set()
    for raw in text.split(","):
        part = raw.strip()
        if not part:
            raise ValueError(f"an empty item (a comma too many); {EXPECTED}")
        m = _ITEM.fullmatch(part)
        if m is None:
            why = "CPU numbers start at 0" if part.startswith("-") else EXPECTED
            raise ValueError(f"{part!r} is not a CPU number or range ({why})")
        lo = int(m.group(1))
        hi = lo if m.group(2) is None else int(m.group(2))
        if max(lo, hi) > MAX_CPU:
            raise ValueError(f"{part!r}: CPU numbers go up to {MAX_CPU}")
        if hi < lo:
            raise ValueError(f"{part!r}: a range runs from the lower CPU to the higher ({hi}-{lo})")
        cpus.update(range(lo, hi + 1))
    return tuple(sorted(cpus))


def format_cpu_list(cpus: Iterable[int]) -> str:
    """The kernel's compact form: [2, 3, 4, 5, 10] -> "2-5,10"."""
    out: list[str] = []
    # Consecutive CPUs share their distance from their position in the sorted list.
    for _, run in itertools.groupby(enumerate(sorted(set(cpus))), key=lambda ic: ic[1] - ic[0]):
        group = [c for _, c in run]
        out.append(str(group[0]) if len(group) == 1 else f"{group[0]}-{group[-1]}")
    return ",".join(out)


def supported() -> bool:
    return hasattr(os, "sched_setaffinity")


@dataclass(frozen=True)
class RunnerPin:
    """This process pinned itself (`pinned_runner`): to `cpus`, from the CPUs it had `before`."""

    cpus: CpuList
    before: frozenset[int]


# The pin `pinned_runner` holds: the launcher checks a server's CPUs against the host's, not the client's few.
_runner_pin: RunnerPin | None = None


def runner_pin() -> RunnerPin | None:
    return _runner_pin


def check_allowed(cpus: Sequence[int], what: str) -> None:
    """AffinityError naming the CPUs of `cpus` outside this host or this process's cgroup/taskset."""
    if not supported():
        raise AffinityError(
            f"{what}: CPU pinning needs Linux (os.sched_setaffinity); this host is {sys.platform}"
        )
    # What this process may give a server: its own affinity, or what it was before it pinned itself.
    allowed = _runner_pin.before if _runner_pin is not None else frozenset(os.sched_getaffinity(0))
    if outside := sorted(set(cpus) - allowed):
        one = len(outside) == 1
        raise AffinityError(
            f"{what}: {'CPU' if one else 'CPUs'} {format_cpu_list(outside)} {'is' if one else 'are'} not "
            f"available on this host (specbench may use CPUs {format_cpu_list(allowed)}, its "
            "os.sched_getaffinity)"
        )


@dataclass
class TreePin:
    """What `pin_tree` did: processes and threads pinned, and one line per thread reading back other CPUs."""

    processes: int = 0
    threads: int = 0
    stray: list[str] = field(default_factory=list)


def pin_tree(pid: int, cpus: Sequence[int]) -> TreePin:
    """Pin every thread of `pid` and descendants and read it back; AffinityError: `pid` gone or refused."""
    wanted = frozenset(cpus)
    try:
        procs = process_tree(pid)
    except psutil.Error as e:
        raise AffinityError(f"cannot list the processes of {pid}: {e}") from None
    out = TreePin()
    for proc in procs:
        try:
            tids = [t.id for t in proc.threads()]
        except psutil.Error:  # exited between listing and reading
            continue
        out.processes += 1
        for tid in tids:
            try:
                os.sched_setaffinity(tid, wanted)
            except ProcessLookupError:  # the thread ended between listing and pinning
                continue
            except OSError as e:
                raise AffinityError(f"cannot pin thread {tid} of process {proc.pid}: {e}") from None
            out.threads += 1
        for tid in tids:
            with contextlib.suppress(ProcessLookupError):
                if (got := frozenset(os.sched_getaffinity(tid))) != wanted:
                    out.stray.append(
                        f"thread {tid} of process {proc.pid} ({_name(proc)}) runs on CPUs {format_cpu_list(got)}, "
                        f"not {format_cpu_list(wanted)}"
                    )
    return out


def _name(proc: psutil.Process) -> str:
    try:
        return proc.name()
    except psutil.Error:
        return "?"


@contextlib.contextmanager
def pinned_runner(cpus: Sequence[int], what: str = "--client-cpus") -> Iterator[RunnerPin]:
    """Pin this process (every thread, so every thread it starts) to `cpus` for the block, then restore."""
    global _runner_pin
    check_allowed(cpus, what)
    wanted = frozenset(cpus)
    me = os.getpid()
    before = frozenset(os.sched_getaffinity(0))
    saved: dict[int, frozenset[int]] = {}
    previous = _runner_pin
    try:
        # A thread started during the first pass inherits from an unpinned creator: repeat until none is new.
        for _ in range(5):
            fresh = [tid for tid in _own_threads(me) if tid not in saved]
            if not fresh:
                break
            for tid in fresh:
                with contextlib.suppress(ProcessLookupError):
                    saved[tid] = frozenset(os.sched_getaffinity(tid))
                    os.sched_setaffinity(tid, wanted)
        pin = RunnerPin(tuple(sorted(wanted)), previous.before if previous is not None else before)
        _runner_pin = pin
        yield pin
    finally:
        _runner_pin = previous
        for tid in _own_threads(me):
            with contextlib.suppress(ProcessLookupError):
                os.sched_setaffinity(tid, saved.get(tid, before))


def _own_threads(pid: int) -> list[int]:
    # /proc/self/task lists this process's threads; psutil reads the same directory.
    return sorted(int(t) for t in os.listdir(f"/proc/{pid}/task") if t.isdigit())
