"""The reference pages keep up with the code: docs/reference/sweep-keys.md lists every key of the sweep schema
(each field of each section model, walked from SweepSpec) in its section's table, and nothing else;
docs/reference/metrics.md lists every metric of the catalogue (bench/catalog.py) with the catalogue's unit and
bench_serving key. The pages' examples are checked against the code too: the annotated sweep is a shipped one,
and the validation example prints what specbench prints."""

from __future__ import annotations

import re
from typing import Any, get_args

import pytest
from pydantic import BaseModel, Field

from analysis.profiles import OVERLAP_COLUMNS
from analysis.v2_vs_v1 import COLUMNS as V2_V1_COLUMNS
from bench import catalog
from bench.sweep import SweepError, SweepSpec, load_sweep, parse_sweep
from bench.sweep.sections import CorrectnessSpec, MeasureSpec, ServerSpec, SimSettings
from db.models import Point
from tests.paths import REPO_ROOT

SWEEP_KEYS = REPO_ROOT / "docs" / "reference" / "sweep-keys.md"
METRICS = REPO_ROOT / "docs" / "reference" / "metrics.md"
EXAMPLE_SWEEP = REPO_ROOT / "sweeps" / "h200-v3shard-40l-steps3.yaml"

_FENCE = re.compile(r"^(```|~~~)")
_SECTION_HEADING = re.compile(r"^#{2,3} (.*)$")
_KEY_ROW = re.compile(r"^\| `(\w+)` \|")
_CELL_SPLIT = re.compile(r"(?<!\\)\|")


def _prose_lines(text: str) -> list[str]:
    """The page's lines outside fenced code blocks (a YAML comment is not a heading)."""
    out: list[str] = []
    fenced = False
    for line in text.splitlines():
        if _FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            out.append(line)
    return out


def _nested_model(annotation: Any) -> type[BaseModel] | None:
    """The section model inside a field's type (`X`, `X | None`, `X | list[X]`, Annotated ...), if any."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in get_args(annotation):
        found = _nested_model(arg)
        if found is not None:
            return found
    return None


def schema_sections(model: type[BaseModel] = SweepSpec, path: str = "") -> dict[str, type[BaseModel]]:
    """Dotted section path ("" for the top level, "server.sim", ...) -> its model, walked recursively."""
    out: dict[str, type[BaseModel]] = {path: model}
    for name, info in model.model_fields.items():
        nested = _nested_model(info.annotation)
        if nested is not None:
            out.update(schema_sections(nested, f"{path}.{name}" if path else name))
    return out


def documented_keys(text: str) -> dict[str, list[str]]:
    """Section path -> the keys (first cell, in backticks) of the table rows under its heading: `## Top level`
    for the top level, a heading that opens with the section's path in backticks (`### \\`server.sim\\``) for
    the others."""
    out: dict[str, list[str]] = {}
    current: str | None = None
    for line in _prose_lines(text):
        heading = _SECTION_HEADING.match(line)
        if heading:
            title = heading.group(1)
            path = re.match(r"`([\w.]+)`", title)
            current = "" if title == "Top level" else (path.group(1) if path else None)
            if current is not None:
                out.setdefault(current, [])
            continue
        row = _KEY_ROW.match(line)
        if row and current is not None:
            out[current].append(row.group(1))
    return out


def sweep_key_problems(text: str, root: type[BaseModel] = SweepSpec) -> list[str]:
    """Every sweep key the page leaves out, lists twice or lists without the schema having it."""
    doc = documented_keys(text)
    schema = schema_sections(root)
    problems: list[str] = []
    for path, model in schema.items():
        prefix = f"{path}." if path else ""
        if path not in doc:
            problems.append(f"{path or 'top level'}: no section on the page")
            continue
        listed = doc[path]
        problems += [f"{prefix}{k}: not documented" for k in model.model_fields if k not in listed]
        problems += [f"{prefix}{k}: documented, but not a key" for k in listed if k not in model.model_fields]
        problems += [
            f"{prefix}{k}: documented twice" for k in sorted({k for k in listed if listed.count(k) > 1})
        ]
    problems += [f"{path}: a section of no model" for path in doc if path not in schema]
    return problems


def metric_rows(text: str) -> dict[str, list[tuple[str, str]]]:
    """Metric name -> (unit cell, bench_serving cell) of each row of the tables headed
    `| metric | unit | bench_serving key |`."""
    out: dict[str, list[tuple[str, str]]] = {}
    in_table = False
    for line in _prose_lines(text):
        if line.startswith("| metric | unit | bench_serving key |"):
            in_table = True
            continue
        if not line.startswith("|"):
            in_table = False
            continue
        cells = [c.strip() for c in _CELL_SPLIT.split(line)[1:-1]]
        name = re.fullmatch(r"`(\w+)`", cells[0]) if cells else None
        if in_table and name:
            out.setdefault(name.group(1), []).append((cells[1], cells[2]))
    return out


def metric_problems(text: str, metrics: tuple[catalog.Metric, ...] = catalog.METRICS) -> list[str]:
    """Every catalogue metric the page leaves out or states with another unit or bench_serving key."""
    rows = metric_rows(text)
    known = {m.name for m in metrics}
    problems: list[str] = []
    for m in metrics:
        if m.name not in rows:
            problems.append(f"{m.name}: not documented")
            continue
        if len(rows[m.name]) > 1:
            problems.append(f"{m.name}: documented twice")
        unit, key = rows[m.name][0]
        if unit != (m.unit or "–"):
            problems.append(f"{m.name}: unit {unit!r}, the catalogue says {m.unit or '–'!r}")
        want = f"`{m.bench_serving}`" if m.bench_serving else "–"
        if key != want:
            problems.append(f"{m.name}: bench_serving key {key!r}, the catalogue says {want!r}")
    problems += [f"{name}: documented, but not in the catalogue" for name in rows if name not in known]
    return problems


def _section(text: str, heading: str) -> str:
    return text.split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]


def _fences(text: str) -> list[tuple[str, str]]:
    return re.findall(r"^```(\w*)\n(.*?)^```", text, re.MULTILINE | re.DOTALL)


# ---- sweep keys


def test_the_schema_walk_reaches_every_section() -> None:
    sections = schema_sections()
    assert {
        "",
        "server",
        "server.sim",
        "grid",
        "workload",
        "warmup",
        "measure",
        "measure.correctness",
    } <= set(sections)
    assert "profile" in sections  # `ProfileSpec | None`
    assert sections["workload"].__name__ == "WorkloadSpec"  # one mapping or a list of them
    assert sum(len(m.model_fields) for m in sections.values()) >= 70


def test_every_sweep_key_is_documented_in_its_section() -> None:
    assert sweep_key_problems(SWEEP_KEYS.read_text(encoding="utf-8")) == []


def test_a_new_sweep_key_without_documentation_fails() -> None:
    class NewSim(SimSettings):
        brand_new_knob: int = 0

    class NewServer(ServerSpec):
        sim: NewSim = Field(default_factory=NewSim)

    class NewCorrectness(CorrectnessSpec):
        tolerance_of_sorts: float = 0.5

    class NewMeasure(MeasureSpec):
        correctness: NewCorrectness = Field(default_factory=NewCorrectness)

    class NewSweep(SweepSpec):
        server: NewServer = Field(default_factory=NewServer)
        measure: NewMeasure = Field(default_factory=NewMeasure)
        another_top_key: bool = False

    assert sweep_key_problems(SWEEP_KEYS.read_text(encoding="utf-8"), NewSweep) == [
        "another_top_key: not documented",
        "server.sim.brand_new_knob: not documented",
        "measure.correctness.tolerance_of_sorts: not documented",
    ]


def test_the_checker_finds_stale_and_missing_sections() -> None:
    page = (
        "# Keys\n\n## Top level\n\n| key | t |\n|---|---|\n| `name` | slug |\n| `name` | slug |\n"
        "| `gone_key` | x |\n\n```yaml\n## `server`\n| `backend` | in a code block |\n```\n\n"
        "### `grid.old`\n\n| `x` | y |\n"
    )
    problems = sweep_key_problems(page)
    assert "model: not documented" in problems
    assert "gone_key: documented, but not a key" in problems
    assert "name: documented twice" in problems
    assert "server: no section on the page" in problems  # a heading inside a code block is no heading
    assert "grid.old: a section of no model" in problems


def test_the_annotated_example_is_the_shipped_sweep() -> None:
    fences = _fences(_section(SWEEP_KEYS.read_text(encoding="utf-8"), "An example, annotated"))
    assert fences and fences[0][0] == "yaml"
    assert parse_sweep(fences[0][1]).model_dump() == load_sweep(EXAMPLE_SWEEP).model_dump()


def test_the_validation_example_prints_what_specbench_prints() -> None:
    fences = _fences(
        _section(SWEEP_KEYS.read_text(encoding="utf-8"), "Validation: every problem in one pass")
    )
    (lang_in, bad), (lang_out, printed) = fences[:2]
    assert (lang_in, lang_out) == ("yaml", "text")
    with pytest.raises(SweepError) as e:
        parse_sweep(bad, "bad.yaml")
    assert any("did you mean" in p for p in e.value.problems)
    assert f"error: {e.value}" == printed.rstrip("\n")


# ---- metrics


def test_every_catalogue_metric_is_documented_with_its_unit_and_key() -> None:
    assert metric_problems(METRICS.read_text(encoding="utf-8")) == []


def test_a_new_metric_without_documentation_fails() -> None:
    new = catalog.Metric("draft_time_ms", "Draft time", "ms", "lower", None)
    changed = catalog.Metric("itl_max_ms", "ITL max", "s", "lower", "max_itl_s")
    metrics = (*(m for m in catalog.METRICS if m.name != "itl_max_ms"), changed, new)
    assert metric_problems(METRICS.read_text(encoding="utf-8"), metrics) == [
        "itl_max_ms: unit 'ms', the catalogue says 's'",
        "itl_max_ms: bench_serving key '`max_itl_ms`', the catalogue says '`max_itl_s`'",
        "draft_time_ms: not documented",
    ]


def test_the_derived_figures_are_real_columns_and_link_their_pages() -> None:
    text = METRICS.read_text(encoding="utf-8")
    derived = _section(text, "Figures specbench derives per point")
    names = re.findall(r"^\| `(\w+)` \|", derived, re.MULTILINE)
    known = set(Point.__table__.columns.keys()) | set(V2_V1_COLUMNS) | set(OVERLAP_COLUMNS)
    assert [n for n in names if n not in known] == []
    asked = {"step_floor_ms", "floor_fraction", "ratio", "ci_low", "ci_high", "overlap_share", "correctness"}
    assert asked | {"correctness_reason", "acceptance_v2_v1", "status"} <= set(names)
    for page in ("paired-measurement", "synthetic-models", "correctness-gate", "profiles", "point-status"):
        assert f"]({page}.md" in derived, page


_COUNT = {5: "five", 6: "six", 7: "seven", 8: "eight", 9: "nine"}


def test_getting_started_names_every_dashboard_page() -> None:
    """The newcomer's guide speaks of as many pages as the dashboard has, and its table has a row for each."""
    from dashboard.navigation import PAGES

    text = (REPO_ROOT / "docs" / "guide" / "getting-started.md").read_text()
    assert f"the {_COUNT[len(PAGES)]} pages" in text
    section = text.split("## 2. The pages", 1)[1].split("\n## ", 1)[0]
    rows = [line.split("|")[1].strip() for line in section.splitlines() if line.startswith("| ")][2:]
    assert rows == [p.title for p in PAGES]
