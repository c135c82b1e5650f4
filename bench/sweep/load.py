"""Reading a sweep file: YAML, then validation that reports every problem of the file in one pass."""

import copy
import re
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from bench import safe_yaml
from bench.files import FileReadError, read_regular_file
from bench.sweep.errors import SweepError, dotted_path, format_validation_errors, strip_branches
from bench.sweep.spec import SweepSpec


def parse_sweep(text: str, source: str = "<sweep>") -> SweepSpec:
    """Validate a sweep's YAML; SweepError lists every problem (YAML, types, ranges, combinations) at once."""
    try:
        data = safe_yaml.load(text)
    except safe_yaml.YAMLLimitError as e:
        raise SweepError(source, [str(e)]) from None
    if not isinstance(data, dict):
        raise SweepError(
            source, ["the top level must be a mapping (name, model, server, grid, workload, ...)"]
        )
    return validate_sweep(data, source)


def read_sweep_text(path: str | Path) -> str:
    """A sweep file's text, or SweepError (missing, unreadable, too large, not UTF-8)."""
    p = Path(path)
    try:
        if not p.exists():  # a directory, FIFO or device is there: read_regular_file says what it is
            raise SweepError(str(p), ["file not found"])
        # Bounded and without blocking (bench/files.py): one byte past the limit lets decode say "larger".
        return safe_yaml.decode(read_regular_file(p, safe_yaml.MAX_BYTES + 1, "a sweep file"))
    except (safe_yaml.YAMLLimitError, FileReadError) as e:
        raise SweepError(str(p), [str(e)]) from None
    except OSError as e:
        raise SweepError(str(p), [f"cannot read: {e.strerror or e}"]) from None


def load_sweep(path: str | Path) -> SweepSpec:
    return parse_sweep(read_sweep_text(path), str(path))


def validate_sweep(data: dict[str, Any], source: str = "<sweep>") -> SweepSpec:
    """The sweep, or SweepError with the field errors and the cross-field problems at once. pydantic runs the
    cross-field checks only on a well-typed model, so broken values are replaced (defaults or placeholders)
    and validation repeated; cross-field problems involving a broken field are left out."""
    try:
        return SweepSpec.model_validate(data)
    except ValidationError as e:
        problems = format_validation_errors(e.errors())
        broken = {dotted_path(strip_branches(err["loc"])) for err in e.errors() if err["loc"]}
    if not broken:  # only cross-field problems: the first round already has them all (once each)
        raise SweepError(source, problems)
    work = copy.deepcopy(data)
    for _ in range(6):  # each round removes at least one value; a handful is plenty
        try:
            SweepSpec.model_validate(work)
            break
        except ValidationError as e:
            errors = e.errors()
            if cross := [err for err in errors if not err["loc"]]:
                for line in format_validation_errors(cross):
                    where = re.sub(r"\[\d+\]", "", re.split(r"[: ]", line, maxsplit=1)[0])
                    if not any(
                        b == where or b.startswith(where + ".") or where.startswith(b + ".") for b in broken
                    ):
                        problems.append(line)
                break
            if not _repair(work, errors):
                break
    raise SweepError(source, problems)


# Stand-ins for required values that were broken, so the cross-field checks can still run.
_PLACEHOLDERS: dict[str, Any] = {
    "name": "placeholder",
    "model": "placeholder",
    "grid": {"batch_sizes": [1]},
    "grid.batch_sizes": [1],
}


def _repair(data: dict[str, Any], errors: list[Any]) -> bool:
    """Take the values the errors point at out of `data` (in place); False when nothing could be done."""
    changed = False
    paths = [strip_branches(err["loc"]) for err in errors if err["type"] != "missing"]
    # Deepest and highest list index first, so removing one item does not shift another still to remove.
    for path in sorted(
        paths,
        key=lambda p: [(isinstance(x, str), x if isinstance(x, int) else 0, str(x)) for x in p],
        reverse=True,
    ):
        changed |= _remove(data, path)
    for err in errors:
        if err["type"] == "missing":
            where = dotted_path(strip_branches(err["loc"]))
            if where not in _PLACEHOLDERS:
                return False
            parent = _walk(data, strip_branches(err["loc"])[:-1])
            if isinstance(parent, dict):
                parent[err["loc"][-1]] = copy.deepcopy(_PLACEHOLDERS[where])
                changed = True
    return changed


def _holds(data: Any, key: Any) -> bool:
    return (isinstance(data, dict) and key in data) or (
        isinstance(data, list) and isinstance(key, int) and 0 <= key < len(data)
    )


def _walk(data: Any, path: list[Any]) -> Any:
    for part in path:
        if not _holds(data, part):
            return None
        data = data[part]
    return data


def _remove(data: dict[str, Any], path: list[Any]) -> bool:
    if not path:
        return False
    for depth in range(len(path), 0, -1):  # the value itself, or the nearest container that exists
        parent = _walk(data, path[: depth - 1])
        key = path[depth - 1]
        if _holds(parent, key):
            del parent[key]
            return True
        if parent is not None and depth < len(path):
            return False  # already removed with its parent
    return False
