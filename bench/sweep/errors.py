"""SweepError, and pydantic's validation errors in the sweep's own words (paths, bounds, did-you-mean)."""

import difflib
import re
from typing import Any, get_args

from pydantic import BaseModel

from bench.sweep.spec import SweepSpec

MAX_PROBLEMS = 20  # past this a sweep is wrong as a whole; the rest are counted (a 64^3 grid gave 1.2 MB)


class SweepError(ValueError):
    """A sweep that cannot run: `problems` (the first MAX_PROBLEMS reasons) and `more` (the rest's count)."""

    def __init__(self, source: str, problems: list[str]):
        self.source = source
        self.problems = problems[:MAX_PROBLEMS]
        self.more = max(len(problems) - MAX_PROBLEMS, 0)
        lines = "\n".join(f"  - {p}" for p in self.problems)
        if self.more:
            lines += f"\n  ... and {self.more:,} more"
        super().__init__(f"{source}: invalid sweep ({len(problems):,} problem(s)):\n{lines}")


def strip_branches(loc: tuple[Any, ...]) -> list[Any]:
    return [part for part in loc if part not in _UNION_BRANCHES and part != "[key]"]


def dotted_path(parts: list[Any]) -> str:
    return ".".join(str(p) for p in parts if not isinstance(p, int))


# pydantic names the union branch in an error; one `workload` mapping wants its own errors.
_UNION_BRANCHES = {
    "WorkloadSpec": "one workload",
    "list[WorkloadSpec]": "a list of workloads",
    # grid.accept_lengths: one list for every steps value, or a list per steps value
    "list[constrained-float]": "a list of lengths",
    "dict[constrained-int,list[constrained-float]]": "lengths per steps value",
}
_WRONG_SHAPE = {"list_type", "model_type", "dict_type", "model_attributes_type"}


def format_validation_errors(errors: list[Any]) -> list[str]:
    out: list[str] = []
    wrong_shape: dict[str, list[str]] = {}  # unions where a branch did not fit the shape at all: its branches
    explained: set[str] = set()  # unions where a branch fit and said what is wrong inside it
    for err in errors:
        parts = [str(x) for x in err["loc"]]
        branch = next((i for i, part in enumerate(parts) if part in _UNION_BRANCHES), None)
        if branch is not None:
            where = ".".join(parts[:branch])
            if err["type"] in _WRONG_SHAPE and len(parts) == branch + 1:
                wrong_shape.setdefault(where, []).append(_UNION_BRANCHES[parts[branch]])
                continue
            explained.add(where)
            del parts[branch]
        if err["type"] == "extra_forbidden":
            out.append(_unknown_key(err["loc"]))
            continue
        key_error = "[key]" in parts
        loc = _loc_text(strip_branches(err["loc"]))
        msg = _message(err)
        if not loc:  # the cross-field check joins its problems with newlines
            out.extend(msg.split("\n"))
        elif err["type"] == "missing":
            out.append(f"{loc}: required")
        else:
            got = err.get("input")
            shown = "" if key_error or isinstance(got, dict | list) else f" (got {_short(got)})"
            out.append(f"{loc}: {msg}{shown}")
    for where in sorted(set(wrong_shape) - explained):  # neither branch fits at all
        shapes = wrong_shape[where]
        out.append(f"{where}: must be {' or '.join(shapes)}" + (" (mappings)" if "workload" in where else ""))
    return out


def _loc_text(parts: list[Any]) -> str:
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _message(err: Any) -> str:
    """pydantic's message in the words of the rest of this module ("must be >= 1")."""
    ctx = err.get("ctx") or {}
    kind = err["type"]
    bounds = {
        "greater_than_equal": ">= {ge}",
        "greater_than": "> {gt}",
        "less_than_equal": "<= {le}",
        "less_than": "< {lt}",
    }
    if kind in bounds:
        return "must be " + bounds[kind].format(**ctx)
    if kind in {"too_short", "string_too_short"} and ctx.get("min_length") == 1:
        return "must not be empty"
    if kind in {"too_long", "string_too_long"}:
        return f"at most {ctx.get('max_length')} {'characters' if kind == 'string_too_long' else 'items'}"
    if kind == "finite_number":
        return "must be a finite number"
    msg = str(err["msg"]).removeprefix("Value error, ")
    msg = re.sub(r"^Input should be a valid ", "must be a ", msg).replace("be a integer", "be an integer")
    return re.sub(r"^Input should be ", "must be ", msg)


def _short(value: Any) -> str:
    text = repr(value)
    if "://" in text and "@" in text:  # a URL with user info may hold a password: never echoed
        return "a URL with user info, not shown"
    return text if len(text) <= 40 else text[:37] + "..."


def _unknown_key(loc: tuple[Any, ...]) -> str:
    parts = strip_branches(loc)
    where = ".".join(str(p) for p in parts[:-1])
    key = parts[-1]
    fields = _fields_at(parts[:-1])
    label = f"{where}: unknown key {_short(key)}" if where else f"unknown key {_short(key)}"
    if fields is None:
        return label
    if close := difflib.get_close_matches(str(key), fields, n=1, cutoff=0.6):
        return f"{label} (did you mean {close[0]!r}?)"
    return f"{label} (expected one of: {', '.join(fields)})"


def _fields_at(path: list[Any]) -> list[str] | None:
    """The keys the model at `path` accepts, following nested models through lists and unions."""
    model: type[BaseModel] = SweepSpec
    for part in path:
        if isinstance(part, int):
            continue
        info = model.model_fields.get(str(part))
        nested = _model_in(info.annotation) if info is not None else None
        if nested is None:
            return None
        model = nested
    return list(model.model_fields)


def _model_in(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in get_args(annotation):
        if (found := _model_in(arg)) is not None:
            return found
    return None
