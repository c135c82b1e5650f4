"""What a host lets a sweep use: interpreters, model and data files, external servers (issue 30 §1-2). A job's
sweep is data from whoever may submit, while the worker holds the database URL and the host's files and
network, so the worker's operator decides on its command line (docs/guide/team-setup.md, "What a worker lets
its jobs use"): interpreters by name (`--python NAME=PATH`), paths only under `--models-dir` / `--data-dir`
(refused alike whether the file exists or not), `--allow-external HOST:PORT`, and remote code and hub
downloads (off; a job sets neither, issue 35 §1). `specbench run` runs its author's own sweep
(HostPolicy.author()): paths stay as written, remote code and downloads off unless asked."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
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


def is_model_id(value: str) -> bool:
    """A hub model id (`org/name` or `name`), not a path: no leading `/`, `.` or `~`, no `..`."""
    return bool(_MODEL_ID.match(value)) and ".." not in value and "--" not in value


def interpreter_name_problem(name: str) -> str | None:
    """Why `server.python` in a job is not an interpreter name a worker could offer, or None."""
    if not _INTERPRETER_NAME.match(name):  # no separator, `~` or leading dot: never a path
        return (
            f"server.python: {name[:80]!r} is a path; a job names an interpreter its worker offers "
            "(specbench worker --python NAME=PATH), never a file"
        )
    return None


def external_address(base_url: str) -> str | None:
    """`host:port` of an http(s) URL (the scheme's port when none is written), lower-case; else None."""
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


@dataclass(frozen=True)
class HostPolicy:
    """A host's rules: the default (`author()`) keeps a sweep as written; `worker(...)` confines a job."""

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
        """The operator's settings, checked: names are words, paths executable, directories exist."""
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

    def interpreter(self, python: str | None) -> str | None:
        """The interpreter for a server: the sweep's path (author) or the operator's (worker); None: ours."""
        if python is None or not self.confined:
            return python
        if problem := interpreter_name_problem(python):
            raise PolicyError([problem])
        if python not in self.pythons:
            offered = ", ".join(sorted(self.pythons)) or "none"
            why = (
                f"server.python: {python!r} is not an interpreter this worker offers (it offers: {offered}; "
                "its operator adds one with --python NAME=PATH)"
            )
            raise PolicyError([why])
        return self.pythons[python]

    def check_model(self, value: object, where: str) -> None:
        """A model, draft or tokenizer a worker may hand a server: an id, or one path string under its model
        directories; the refusal ignores whether the path exists."""
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
            why = (
                f"server.base_url: {shown} is not on this worker's --allow-external list, so nothing was "
                "sent to it (a worker measures only the external servers its operator allows)"
            )
            raise PolicyError([why])

    def _check_under(
        self, value: str, where: str, roots: tuple[str, ...], option: str, alternative: str | None
    ) -> None:
        # Decided on the path's text and resolved prefix alone: the same message whether it exists or not.
        real = os.path.realpath(value) if os.path.isabs(value) else None
        if real is not None and any(real == r or real.startswith(r.rstrip(os.sep) + os.sep) for r in roots):
            return
        allowed = ", ".join(roots) if roots else f"none: its operator sets {option} DIR"
        tail = f", or {alternative}" if alternative else ""
        why = (
            f"{where}: {value[:200]!r} is not under this worker's {option} directories ({allowed}); a job "
            f"names a file there by absolute path{tail}"
        )
        raise PolicyError([why])

    def problems(self, spec: SweepSpec) -> list[str]:
        """Every reason this host will not run `spec`, before anything runs (empty: it may)."""
        server = spec.server
        files: list[tuple[Callable[[Any, str], None], object, str]] = [
            (self.check_model, spec.model, "model"),
            (self.check_model, spec.draft_model, "draft_model"),
        ]
        for flag in sorted(PATH_FLAGS & set(server.args)):
            files.append((self.check_model, server.args[flag], f"server.args.{flag}"))
        many = isinstance(spec.workload, list)
        for i, w in enumerate(spec.workloads):
            files.append((self.check_data_file, w.path, f"workload[{i}].path" if many else "workload.path"))
        checks: list[Callable[[], object]] = [
            partial(self.check_external, server.base_url)
            if server.backend == "external"
            else partial(self.interpreter, server.python),
            *(partial(check, value, where) for check, value, where in files if value is not None),
        ]
        out: list[str] = []
        for check in checks:
            try:
                check()
            except PolicyError as e:
                out.extend(e.problems)
        return out

    def offered(self) -> dict[str, list[str]]:
        """What a worker tells the queue it offers (names and addresses, never paths)."""
        return {"python": sorted(self.pythons), "external": sorted(self.external)}
