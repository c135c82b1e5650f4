"""A run comparison as CSV (for spreadsheets) and as a Markdown PR comment (for pasting under a PR).

Self-contained: verdict summary, both runs' provenance, the point table (flagged first), the commands that
reproduce each run; from `analysis.compare.compare_runs` and `db.queries.run_info`.
"""

import difflib
from collections.abc import Mapping
from datetime import datetime
from typing import Any

import pandas as pd

from analysis import correctness, md
from analysis.compare import COMPARE_COLUMNS, center_text, one_sided, verdict_counts
from analysis.labels import MEASURED, STAND_IN_TAG, kinds_text, numbers_caption, run_kind, run_tag, short_gpu
from analysis.plain import missing, plain
from analysis.render import Column, Document, columns, magnitude, md_table, signed_pct
from bench.catalog import direction_text, label

VERDICT_BADGE = {
    "regression": "🔴 regression",
    "improvement": "🟢 improvement",
    "no change": "⚪ no change",
    "insufficient data": "⚠️ insufficient data",
}
MAX_MARKDOWN_ROWS = 40  # past this, the no-change rows are left to the CSV
SHORT_ROWS = 6  # changed rows in the short comment (largest first): it stays near 3 KB
_VERDICT_RANK = {"regression": 1, "improvement": 0}


# The compare table, each row with its runs' kind of numbers (two kinds do not compare: comparability).
VIEW = columns(
    ("kind", *COMPARE_COLUMNS),
    ints=("steps", "batch_size", "n_baseline", "n_candidate", "point_baseline", "point_candidate"),
    text=(
        *("kind", "config", "model", "workload", "spec_mode", "metric", "center", "verdict", "why", "note"),
        *("fingerprint", "correctness_baseline", "correctness_candidate", "correctness_why"),
    ),
)


def document(
    table: pd.DataFrame,
    run_a: Mapping[str, Any],
    run_b: Mapping[str, Any],
    **markdown: Any,
) -> Document:
    """The comparison in every format; `markdown`: the options of `to_markdown`."""
    head = {"baseline": _run_json(run_a), "candidate": _run_json(run_b), "counts": verdict_counts(table)}
    kind = kinds_text(_kind(r) for r in (run_a, run_b))
    return Document(
        table.assign(kind=kind),
        VIEW,
        lambda: to_markdown(table, run_a, run_b, **markdown),
        head=head,
        rows_key="points",
    )


def _kind(r: Mapping[str, Any]) -> str:
    return run_kind(r.get("simulated"), r.get("trigger"))


def _run_json(r: Mapping[str, Any]) -> dict[str, Any]:
    out = {k: plain(v) for k, v in r.items() if k != "sweep_yaml"}
    out["kind"] = _kind(r)
    return out


def counts_line(counts: Mapping[str, int]) -> str:
    """`13 regressions · 0 improvements · 0 insufficient data · 15 no change`."""
    return " · ".join(
        f"{n} {v}{'s' if n != 1 and v in ('regression', 'improvement') else ''}" for v, n in counts.items()
    )


def to_markdown(
    table: pd.DataFrame,
    run_a: Mapping[str, Any],
    run_b: Mapping[str, Any],
    *,
    metric: str = "output_throughput",
    threshold: float = 0.05,
    confidence: float = 0.95,
    max_rows: int = MAX_MARKDOWN_ROWS,
    short: bool = False,
) -> str:
    """The comparison as a Markdown PR comment: every row up to `max_rows`, or `short` for a PR thread
    (changed rows, the rest as counts; provenance rows that differ; sweep files folded)."""
    counts = verdict_counts(table)
    center = center_text(table)
    lines = [
        f"### specbench: run {run_b.get('id')} vs baseline run {run_a.get('id')} — {label(metric)}",
        "",
        f"**{counts_line(counts)}**",
        "",
        f"Δ = candidate / baseline − 1 of the repeats' {center}s, shown in the Baseline and Candidate columns "
        f"({direction_text(metric)}); {confidence:.0%} interval from the per-repeat samples; flagged when the "
        f"interval excludes 0 and |Δ| ≥ {threshold:.0%}.",
        "",
        *_correctness_block(table, run_a, run_b),
        *_provenance_table(run_a, run_b, only_differences=short),
        "",
        *(_short_points(table) if short else _points_table(table, max_rows)),
        "",
        *(_reproduce_short(run_a, run_b) if short else _reproduce(run_a, run_b)),
    ]
    if notices := [f"> ⚠️ {n}" for n in made_up_notices(run_a, run_b)]:
        lines[2:2] = [*notices, ""]
    return "\n".join(lines).rstrip() + "\n"


def made_up_notices(run_a: Mapping[str, Any], run_b: Mapping[str, Any]) -> list[str]:
    """Which runs of a comparison are made up, one Markdown line each (PR comment and Compare page)."""
    tags = [run_tag(r.get("simulated"), r.get("trigger")) for r in (run_a, run_b)]
    what = {
        STAND_IN_TAG: f"**{STAND_IN_TAG}**: measured on the stand-in server, numbers from its performance "
        "model, not a GPU.",
        "synthetic": "SYNTHETIC data (load-test history), not a measurement.",
    }
    if tags[0] and tags[0] == tags[1]:
        return [f"Both runs are {what[tags[0]]}"]
    return [
        f"{role} run #{r.get('id')} is {what[tag]}"
        for role, r, tag in (("Baseline", run_a, tags[0]), ("Candidate", run_b, tags[1]))
        if tag
    ]


def _correctness_block(table: pd.DataFrame, a: Mapping[str, Any], b: Mapping[str, Any]) -> list[str]:
    """The correctness gate first: a wrong path's speed is a finding, not a number (empty: none checked)."""
    if table.empty:
        return []
    out: list[str] = []
    for side, run, whose in (("candidate", b, "the candidate"), ("baseline", a, "the baseline")):
        rows = table[table[f"correctness_{side}"] == "fail"]
        failed = {
            str(r["config"]).split(" · ")[0]: str(r["correctness_why"] or "") for r in rows.to_dict("records")
        }
        out += correctness.banner_md(list(failed.items()), f"{whose} run #{run.get('id')}")
    if not out:
        checked = table[["correctness_baseline", "correctness_candidate"]].stack()
        if checked.empty:
            return []
        n_pass = int((checked == "pass").sum())
        if not n_pass:
            return ["Correctness gate: no point was checked (why: `specbench export --all-status`).", ""]
        return [
            f"✅ Correctness gate: {n_pass} checked point(s) reproduced the baseline's tokens and v1's acceptance.",
            "",
        ]
    return out


def _provenance_table(
    a: Mapping[str, Any], b: Mapping[str, Any], *, only_differences: bool = False
) -> list[str]:
    def version(r: Mapping[str, Any]) -> str:
        v = r.get("sglang_version") or "?"
        commit = r.get("sglang_commit")
        return f"{md.text(v)} @ {md.code(str(commit)[:10])}" if commit else md.text(v)

    def when(r: Mapping[str, Any]) -> str:
        t = r.get("started_at")
        return md.text(t.strftime("%Y-%m-%d %H:%M UTC") if isinstance(t, datetime) else str(t or "?"))

    rows = [
        (
            "Run",
            lambda r: (
                f"#{md.text(r.get('id'))} {md.code(str(r.get('uid') or '')[:8])} {md.text(r.get('status') or '')}"
            ),
        ),
        ("Started", when),
        ("Sweep", lambda r: md.text(f"{r.get('sweep_name')} ({r.get('trigger')})")),
        ("SGLang", version),
        (
            "sgl-kernel / flashinfer",
            lambda r: md.text(f"{r.get('sgl_kernel_version') or '?'} / {r.get('flashinfer_version') or '?'}"),
        ),
        (
            "torch / CUDA / driver",
            lambda r: md.text(
                f"{r.get('torch_version') or '?'} / {r.get('cuda_version') or '?'} / {r.get('driver_version') or '?'}"
            ),
        ),
        (
            "GPU",
            lambda r: md.text(
                f"{short_gpu(r.get('gpu_name'), r.get('gpu_count'))} on {r.get('host') or '?'}"
            ),
        ),
        ("Model", lambda r: md.code(r.get("model") or "?")),
        ("Kind", lambda r: run_tag(r.get("simulated"), r.get("trigger")) or MEASURED),
        # What the numbers are made of: dummy weights, pinned acceptance, expert routing (analysis.labels).
        ("Numbers", lambda r: md.text(numbers_caption(r.get("caption_facts") or {}) or "–")),
    ]
    out = ["| | Baseline | Candidate |", "|---|---|---|"]
    # The short form keeps what identifies the runs and what differs between them, and what the numbers are
    # made of whenever either run says (a synthetic model's numbers must never pass for a deployment's).
    said = any(numbers_caption(r.get("caption_facts") or {}) for r in (a, b))
    always = {"Run", "SGLang", "GPU", *(["Numbers"] if said else [])}
    for name, fn in rows:
        va, vb = fn(a), fn(b)
        if only_differences and name not in always and va == vb:
            continue
        out.append(f"| {name} | {va} | {vb} |")  # each cell is escaped by its row's function
    return out


def _points_table(table: pd.DataFrame, max_rows: int, *, workload: bool = True) -> list[str]:
    if table.empty:
        return ["_No points to compare: the runs share no configuration._"]
    shown = table if len(table) <= max_rows else table[table["verdict"] != "no change"].head(max_rows)
    omitted = len(table) - len(shown)
    multi_model = table["model"].nunique() > 1
    cols = [
        Column("config", "Config", text=True),
        *([Column("model", "Model", text=True, show=lambda r: md.code(r["model"]))] if multi_model else []),
        *([Column("workload", "Workload", text=True)] if workload else []),
        Column("baseline", f"Baseline ({center_text(table)})", show=lambda r: _value(r, "baseline")),
        Column("candidate", "Candidate", show=lambda r: _value(r, "candidate")),
        Column("delta", "Δ", show=lambda r: signed_pct(r["delta"], "−")),
        Column("interval", "Interval", text=True, show=_interval),
        Column("verdict", "Verdict", text=True, show=_verdict),
        Column("why", "Why", text=True, show=lambda r: md.text(r.get("why") or r.get("note") or "")),
    ]
    out = md_table(shown.to_dict("records"), cols)
    if omitted:
        out += ["", f"_{omitted} more point(s) with no change are in the CSV._"]
    return out


def _short_points(table: pd.DataFrame) -> list[str]:
    """Changed rows in a table; everything else as counts."""
    if table.empty or one_sided(table).all():
        return ["_No points to compare: the runs share no configuration._"]
    sided = one_sided(table)
    wrong = (table["correctness_baseline"] == "fail") | (table["correctness_candidate"] == "fail")
    # Rows the correctness gate failed are always shown: a wrong path's speed is the headline, not a count.
    changed = table[(table["verdict"].isin(["regression", "improvement"]) | wrong) & ~sided]
    rest = table[~table.index.isin(changed.index)]
    parts = [
        f"{n} {what}"
        for what, n in (
            ("unchanged", int((rest["verdict"] == "no change").sum())),
            (
                "with too few repeats",
                int(((rest["verdict"] == "insufficient data") & ~sided[rest.index]).sum()),
            ),
            ("only in the baseline run", int(rest["point_candidate"].isna().sum())),
            ("only in the candidate run", int(rest["point_baseline"].isna().sum())),
        )
        if n
    ]
    # Largest changes first within each verdict, and at most SHORT_ROWS of them: a comment stays a comment.
    changed = changed.assign(_size=changed["delta"].abs(), _wrong=wrong[changed.index]).sort_values(
        ["_wrong", "verdict", "_size"],
        ascending=[False, False, False],
        key=lambda c: c.map(_VERDICT_RANK) if c.name == "verdict" else c,
    )
    # Every wrong row, then the largest changes up to SHORT_ROWS.
    limit = max(SHORT_ROWS, int(changed["_wrong"].sum()))
    shown = changed.head(limit).drop(columns=["_size", "_wrong"])
    # The largest factor only (the attribution lists them largest first); the full form has them all.
    shown = shown.assign(why=[str(w or "").split(", ")[0] for w in shown["why"]])
    hidden = changed.iloc[limit:]
    for verdict, n in hidden["verdict"].value_counts().items():
        parts.insert(0, f"{n} smaller {verdict}{'s' if n != 1 else ''}")
    out = (
        _points_table(shown, len(shown), workload=table["workload"].nunique() > 1)
        if len(shown)
        else ["_No point changed._"]
    )
    if parts:
        out += ["", "Not shown: " + ", ".join(parts) + " (every row: `--format csv`)."]
    return out


def _reproduce(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[str]:
    # The only HTML in the comment is this fixed wrapper; everything inside is fenced or escaped, so a stored
    # name or YAML holding `</details>` stays text.
    out = ["<details><summary>Reproduce both runs</summary>", ""]
    same_sweep = (a.get("sweep_yaml") or "") == (b.get("sweep_yaml") or "")
    for role, r in (("baseline", a), ("candidate", b)):
        fname = (
            f"{r.get('sweep_name') or 'sweep'}.yaml" if same_sweep else f"{role}-{r.get('sweep_name')}.yaml"
        )
        # Commands a reader copies into a shell: every stored value is one quoted word on its line.
        commands = [
            md.one_line(
                f"# {role}: run {r.get('id')} ({r.get('sweep_name')}, {short_gpu(r.get('gpu_name'), r.get('gpu_count'))})"
            ),
            *_install_lines(r),
            f"specbench run {md.shell(fname)} --label {md.shell(f'{role}-' + str(r.get('sglang_version') or 'unknown'))}",
            f"specbench export --run <new run id> --format csv   # compare: specbench compare {md.shell(a.get('id'))} <new run id>",
        ]
        out += [*md.fence("\n".join(commands), "bash"), ""]
    yamls = [("", a)] if same_sweep else [("baseline-", a), ("candidate-", b)]
    for prefix, r in yamls:
        if text := (r.get("sweep_yaml") or "").strip():
            # Folded: the sweep file is for whoever reruns it, not for every reader of the thread.
            out += _folded(md.html_code(f"{prefix}{r.get('sweep_name')}.yaml"), md.fence(text, "yaml"))
    out.append("</details>")
    return out


# Values provenance records for "not known" or "not installed"; a pin on them would not install.
_UNKNOWN_VERSIONS = frozenset({"", "none", "unknown", "?", "n/a", "null"})


def _known(v: Any) -> str | None:
    text = str(v).strip() if v is not None else ""
    return None if text.lower() in _UNKNOWN_VERSIONS else text


def _reproduce_short(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[str]:
    """One command block for both runs, the baseline's sweep file folded, the candidate's as a diff."""
    same_sweep = (a.get("sweep_yaml") or "") == (b.get("sweep_yaml") or "")
    commands: list[str] = []
    for role, r in (("baseline", a), ("candidate", b)):
        fname = "sweep.yaml" if same_sweep else f"{role}.yaml"
        commands += [
            md.one_line(
                f"# {role}: run {r.get('id')} ({r.get('sweep_name')}, {short_gpu(r.get('gpu_name'), r.get('gpu_count'))})"
            ),
            *_install_lines(r),
            f"specbench run {fname} --label {role}",
        ]
    commands.append("specbench compare <baseline run> <candidate run> --format comment")
    out = ["<details><summary>Reproduce</summary>", "", *md.fence("\n".join(commands), "bash"), ""]
    base_yaml = (a.get("sweep_yaml") or "").strip()
    cand_yaml = (b.get("sweep_yaml") or "").strip()
    if base_yaml:
        name = "sweep" if same_sweep else "baseline"
        out += _folded(f"<code>{name}.yaml</code>", md.fence(base_yaml, "yaml"))
    if cand_yaml and not same_sweep:
        diff = difflib.unified_diff(
            _uncommented(base_yaml),
            _uncommented(cand_yaml),
            "baseline.yaml",
            "candidate.yaml",
            n=0,
            lineterm="",
        )
        out += _folded(
            "<code>candidate.yaml</code> (diff, comments left out)", md.fence("\n".join(diff), "diff")
        )
    out.append("</details>")
    return out


def _folded(summary_html: str, body: list[str]) -> list[str]:
    """A collapsed block; `summary_html` is ours or escaped (md.html_code), `body` fenced."""
    return [f"<details><summary>{summary_html}</summary>", "", *body, "", "</details>", ""]


def _uncommented(text: str) -> list[str]:
    return [line for line in text.splitlines() if not line.lstrip().startswith("#")]


def _install_lines(r: Mapping[str, Any]) -> list[str]:
    if run_tag(r.get("simulated"), r.get("trigger")) == STAND_IN_TAG:
        return ["# stand-in server (synthetic.server): nothing to install besides specbench"]
    version, commit = _known(r.get("sglang_version")), _known(r.get("sglang_commit"))
    lines = []
    if commit:
        lines.append(
            "pip install "
            + md.shell(f"sglang @ git+https://github.com/sgl-project/sglang.git@{commit}#subdirectory=python")
        )
    elif version:
        lines.append("pip install " + md.shell(f"sglang=={version}"))
    pins = [
        md.shell(f"{pkg}=={_known(r.get(col))}")
        for pkg, col in (("sglang-kernel", "sgl_kernel_version"), ("flashinfer-python", "flashinfer_version"))
        if _known(r.get(col))
    ]
    if pins:
        lines.append("pip install " + " ".join(pins))
    return lines


def _wrong(r: Mapping[str, Any]) -> list[str]:
    return [s for s in ("baseline", "candidate") if correctness.is_wrong(r.get(f"correctness_{s}"))]


def _value(r: Mapping[str, Any], side: str) -> str:
    text = magnitude(r[side])
    return f"~~{text}~~ **{correctness.WRONG}**" if side in _wrong(r) and text != "–" else text


def _interval(r: Mapping[str, Any]) -> str:
    if missing(r["ci_low"]):
        return "–"
    return f"[{signed_pct(r['ci_low'], '−')}, {signed_pct(r['ci_high'], '−')}]"


def _verdict(r: Mapping[str, Any]) -> str:
    if wrong := _wrong(r):
        return f"🛑 **{correctness.WRONG}** ({' and '.join(wrong)})"
    return VERDICT_BADGE.get(r["verdict"]) or md.text(r["verdict"])
