"""What a host lets a sweep use: interpreters, model and data files, external servers (issue 30 §1-2).

A job's sweep is data written by whoever may submit jobs; the worker that runs it holds the team's database
URL and reaches its host's files and network. So the worker's operator decides, on its command line:

  * which interpreters run servers: `--python NAME=PATH`; a job names one (`server.python: NAME`), never a
    file. Without `server.python` a server runs on the worker's own interpreter.
  * where model checkpoints and workload files may live: `--models-dir DIR`, `--data-dir DIR`. A job names a
    file there by absolute path; it resolves (symlinks and `..` followed) to a place under one of them, or the
    job is refused before anything runs, with a message that is the same whether the file exists or not.
    A model id that is not a path (`deepseek-ai/DeepSeek-V3`, `sim-tiny`) is handed to SGLang as a hub id;
    the server runs in its log directory, so an id never names a directory of the worker's.
  * which external servers it may measure: `--allow-external HOST:PORT`. Any other `backend: external` job
    is refused before a single request leaves the worker.
  * whether SGLang may run a checkpoint's own Python (`--trust-remote-code`) and fetch from the hub
    (`--allow-hub-downloads`): both off unless the operator (or `run`'s author) turns them on. A job can
    neither pass the flag nor set HF_HUB_OFFLINE (issue 35 §1).

`specbench run` runs its author's own sweep (HostPolicy.author()): explicit interpreter and file paths stay
as written; remote code and downloads are off there too unless asked for. What every host applies, author or not, lives with the readers: workload files are regular files
read with a size cap (bench/workload.py), the version probe gets the server's scrubbed environment.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from bench.server.flags import PATH_FLAGS, path_value_problem

if TYPE_CHECKING:  # bench.sweep imports bench.host (cpu_affinity); only types are needed here
    from bench.sweep import SweepSpec

# An interpreter's name in a sweep: a word, never a path.
_INTERPRETER_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,63}$")
# A hub model id: `name` or `org/name`, as Hugging Face spells repository ids ('..' and '--' are not allowed).
_MODEL_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,95}(/[A-Za-z0-9][A-Za-z0-9._-]{0,95})?$")
_HOST_PORT = re.compile(r"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]{1,253}):(\d{1,5})$")
_DEFAULT_PORTS = {"http": 80, "https": 443}


class PolicyError(ValueError):
    """What a sweep asks for that this host does not allow; `problems` lists every reason."""

    def __init__(self, problems: Sequence[str]):
        self.problems = list(problems)
        super().__init__("; ".join(self.problems))


def is_path_like(value: str) -> bool:
    """Whether `value` reads as a file path rather than a name: a separator, `~`, or a leading dot."""
    return "/" in value or "\\" in value or value.startswith(("~", "."))


def is_model_id(value: str) -> bool:
    """A hub model id (`org/name` or `name`), not a path: no leading `/`, `.` or `~`, no `..`."""
    return bool(_MODEL_ID.match(value)) and ".." not in value and "--" not in value


def interpreter_name_problem(name: str) -> str | None:
    """Why `server.python` in a job is not an interpreter name a worker could offer, or None."""
    if is_path_like(name) or not _INTERPRETER_NAME.match(name):
        return (
            f"server.python: {name[:80]!r} is a path; a job names an interpreter its worker offers "
            "(specbench worker --python NAME=PATH), never a file"
        )
    return None


def external_address(base_url: str) -> str | None:
    """`host:port` of an external server's URL (the scheme's port when none is written), lower-case; None
    when it is not an http(s) URL with a host."""
    try:
        parts = urlsplit(base_url)
        port = parts.port
    except ValueError:
        return None
    if parts.scheme not in _DEFAULT_PORTS or not parts.hostname:
        return None
    host = parts.hostname.lower()
    if ":" in host:
        host = f"[{host}]"
    return f"{host}:{port or _DEFAULT_PORTS[parts.scheme]}"


def parse_host_port(text: str) -> str:
    """`--allow-external HOST:PORT` as stored (host lower-case); ValueError for anything else."""
    m = _HOST_PORT.match(text.strip())
    if not m or not 0 < int(m.group(2)) < 65536:
        raise ValueError(f"--allow-external {text[:80]!r}: expected HOST:PORT, e.g. 10.0.0.5:30000")
    return f"{m.group(1).lower()}:{int(m.group(2))}"


def _inside(real: str, roots: Iterable[str]) -> bool:
    return any(real == root or real.startswith(root.rstrip(os.sep) + os.sep) for root in roots)


@dataclass(frozen=True)
class HostPolicy:
    """The rules one host applies to the sweeps it runs. The default (and `author()`) keeps a sweep as its
    author wrote it; `worker(...)` confines a job to what the operator configured."""

    confined: bool = False
    pythons: Mapping[str, str] = field(default_factory=dict)  # NAME -> interpreter path
    models_dirs: tuple[str, ...] = ()  # real paths
    data_dirs: tuple[str, ...] = ()  # real paths
    external: frozenset[str] = frozenset()  # "host:port"
    trust_remote_code: bool = False  # SGLang may run Python a checkpoint ships (--trust-remote-code)
    hub_downloads: bool = False  # servers may fetch from the Hugging Face hub (else HF_HUB_OFFLINE=1)

    @classmethod
    def author(cls, *, trust_remote_code: bool = False, hub_downloads: bool = False) -> HostPolicy:
        return cls(trust_remote_code=trust_remote_code, hub_downloads=hub_downloads)

    @classmethod
    def worker(
        cls,
        *,
        pythons: Mapping[str, str] | None = None,
        models_dirs: Iterable[str] = (),
        data_dirs: Iterable[str] = (),
        external: Iterable[str] = (),
        trust_remote_code: bool = False,
        hub_downloads: bool = False,
    ) -> HostPolicy:
        """The operator's settings, checked: interpreter names are words and their paths executable files;
        directories exist (stored resolved, so a check compares real paths); addresses are HOST:PORT."""
        problems: list[str] = []
        checked: dict[str, str] = {}
        for name, path in (pythons or {}).items():
            if interpreter_name_problem(name):
                problems.append(f"--python {name[:64]!r}: the name is a word (letters, digits, . _ + -)")
            elif not os.path.isabs(path) or not os.path.isfile(path) or not os.access(path, os.X_OK):
                problems.append(f"--python {name}={path}: not an executable file (give an absolute path)")
            else:
                checked[name] = path

        def dirs(option: str, values: Iterable[str]) -> tuple[str, ...]:
            out = []
            for d in values:
                real = os.path.realpath(d)
                if not os.path.isdir(real):
                    problems.append(f"{option} {d}: not a directory")
                else:
                    out.append(real)
            return tuple(dict.fromkeys(out))

        models, data = dirs("--models-dir", models_dirs), dirs("--data-dir", data_dirs)
        allowed: set[str] = set()
        for text in external:
            try:
                allowed.add(parse_host_port(text))
            except ValueError as e:
                problems.append(str(e))
        if problems:
            raise PolicyError(problems)
        return cls(True, checked, models, data, frozenset(allowed), trust_remote_code, hub_downloads)

    # ---- one value at a time ------------------------------------------------------------------------------

    def interpreter(self, python: str | None) -> str | None:
        """The interpreter to run a server with: the sweep's path as written (author), or the path the
        operator gave the sweep's name (worker); None: the interpreter running specbench."""
        if python is None or not self.confined:
            return python
        problem = interpreter_name_problem(python)
        if problem:
            raise PolicyError([problem])
        if python not in self.pythons:
            offered = ", ".join(sorted(self.pythons)) or "none"
            raise PolicyError(
                [
                    f"server.python: {python!r} is not an interpreter this worker offers (it offers: {offered}; "
                    "its operator adds one with --python NAME=PATH)"
                ]
            )
        return self.pythons[python]

    def check_model(self, value: object, where: str) -> None:
        """A model (or draft, or tokenizer) a worker may hand to a server: an id, or a path under its
        model directories; one string, whatever else YAML can make of it (a list, a number, a mapping is
        refused on every host). The refusal does not depend on whether the path exists."""
        if not isinstance(value, str):
            raise PolicyError([path_value_problem(where, value) or where])
        if not self.confined or is_model_id(value):
            return
        self._check_under(value, where, self.models_dirs, "--models-dir", "a model id such as org/name")

    def check_data_file(self, value: str, where: str) -> None:
        """A workload file a worker may read: a path under its data directories."""
        if not self.confined:
            return
        self._check_under(value, where, self.data_dirs, "--data-dir", None)

    def check_external(self, base_url: str | None) -> None:
        """An external server a worker may send requests to: one on its --allow-external list."""
        if not self.confined:
            return
        address = external_address(base_url or "")
        if address is None or address not in self.external:
            shown = address or (base_url or "")[:80]
            raise PolicyError(
                [
                    f"server.base_url: {shown} is not on this worker's --allow-external list, so nothing was "
                    "sent to it (a worker measures only the external servers its operator allows)"
                ]
            )

    def _check_under(
        self, value: str, where: str, roots: tuple[str, ...], option: str, alternative: str | None
    ) -> None:
        # Decided on the path's text and the resolved prefix alone: the message is byte-identical whether
        # the file exists or not, and the worker opens nothing outside its directories to decide.
        real = os.path.realpath(value) if os.path.isabs(value) else None
        if real is not None and _inside(real, roots):
            return
        allowed = ", ".join(roots) if roots else f"none: its operator sets {option} DIR"
        tail = f", or {alternative}" if alternative else ""
        raise PolicyError(
            [
                f"{where}: {value[:200]!r} is not under this worker's {option} directories ({allowed}); a job "
                f"names a file there by absolute path{tail}"
            ]
        )

    # ---- a whole sweep ------------------------------------------------------------------------------------

    def problems(self, spec: SweepSpec) -> list[str]:
        """Every reason this host will not run `spec`, before anything runs (empty: it may)."""
        server = spec.server
        checks: list[Callable[[], object]] = []
        if server.backend == "external":
            checks.append(lambda: self.check_external(server.base_url))
        else:
            checks.append(lambda: self.interpreter(server.python))
        files: list[tuple[Callable[[Any, str], None], object, str]] = [
            (self.check_model, spec.model, "model"),
            (self.check_model, spec.draft_model, "draft_model"),
        ]
        for flag in sorted(PATH_FLAGS & set(server.args)):
            files.append((self.check_model, server.args[flag], f"server.args.{flag}"))
        many = isinstance(spec.workload, list)
        for i, w in enumerate(spec.workloads):
            files.append((self.check_data_file, w.path, f"workload[{i}].path" if many else "workload.path"))
        out: list[str] = []
        for check in checks:
            try:
                check()
            except PolicyError as e:
                out.extend(e.problems)
        for check_file, value, where in files:
            if value is None:
                continue
            try:
                check_file(value, where)
            except PolicyError as e:
                out.extend(e.problems)
        return out

    def offered(self) -> dict[str, list[str]]:
        """What a worker tells the queue it offers (names and addresses, never paths)."""
        return {"python": sorted(self.pythons), "external": sorted(self.external)}
