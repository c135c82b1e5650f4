"""The package layering (README "Layout"): each room imports only the rooms below it.

bench measures and db stores (neither imports the other nor anything above); analysis sits on both; runners
and dashboard sit on top, and the CLI never depends on the UI. Only the dashboard imports Streamlit.
synthetic (what specbench makes up: the stand-in, synthetic models, seeded histories) sits on bench and db,
and nothing that measures, stores or analyses imports it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ROOMS = ("bench", "db", "analysis", "synthetic", "runners", "dashboard")
FORBIDDEN: dict[str, set[str]] = {
    "bench": {"db", "analysis", "synthetic", "runners", "dashboard", "streamlit"},
    "db": {"bench", "analysis", "synthetic", "runners", "dashboard", "streamlit"},
    "analysis": {"synthetic", "runners", "dashboard", "streamlit"},
    "synthetic": {"analysis", "runners", "dashboard", "streamlit"},
    "runners": {"dashboard", "streamlit"},
    "dashboard": {"runners"},
}


def imported_roots(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    roots: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            roots |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            roots.add(node.module.split(".")[0])
    return roots


@pytest.mark.parametrize("room", ROOMS)
def test_room_imports_only_what_is_below_it(room: str) -> None:
    files = sorted((ROOT / room).rglob("*.py"))
    assert files, room
    bad = {
        str(f.relative_to(ROOT)): sorted(imported_roots(f) & FORBIDDEN[room])
        for f in files
        if imported_roots(f) & FORBIDDEN[room]
    }
    assert not bad, f"{room} imports what it must not: {bad}"


def test_the_checker_sees_a_violation(tmp_path: Path) -> None:
    f = tmp_path / "x.py"
    f.write_text("import streamlit as st\nfrom dashboard.services import data\nfrom . import sibling\n")
    assert imported_roots(f) == {"streamlit", "dashboard"}
