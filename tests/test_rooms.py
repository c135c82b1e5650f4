"""The package layering: each room imports only the rooms its row allows in docs/reference/architecture.md.

The table there is the one statement of the rules; this test reads it. bench measures and db stores (neither
imports the other nor anything above); analysis sits on both; runners and dashboard sit on top, and the CLI
never depends on the UI. synthetic (what specbench makes up: the stand-in, synthetic models, seeded
histories) sits on bench and db, and nothing that measures, stores or analyses imports it. Only the dashboard
imports Streamlit.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from tests.paths import REPO_ROOT

ROOMS = ("bench", "db", "analysis", "synthetic", "runners", "dashboard")
ARCHITECTURE = REPO_ROOT / "docs" / "reference" / "architecture.md"


def room_table(text: str) -> dict[str, set[str]]:
    """room -> the rooms its row of the "Rooms" table may import (its last column)."""
    section = text.split("## Rooms", 1)[1].split("\n## ", 1)[0]
    out: dict[str, set[str]] = {}
    for line in section.splitlines():
        m = re.match(r"^\| `(\w+)/` \|.*\| ([^|]*) \|$", line)
        if m:
            out[m.group(1)] = set(re.findall(r"`(\w+)`", m.group(2)))
    return out


ALLOWED = room_table(ARCHITECTURE.read_text())
FORBIDDEN: dict[str, set[str]] = {
    room: (set(ROOMS) - {room} - ALLOWED.get(room, set())) | ({"streamlit"} if room != "dashboard" else set())
    for room in ROOMS
}


def test_the_table_names_every_room_and_only_rooms() -> None:
    assert set(ALLOWED) == set(ROOMS)
    assert all(allowed <= set(ROOMS) for allowed in ALLOWED.values()), ALLOWED
    assert ALLOWED["bench"] == ALLOWED["db"] == set()  # the floor
    assert "synthetic" not in ALLOWED["analysis"] | ALLOWED["dashboard"]


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
    files = sorted((REPO_ROOT / room).rglob("*.py"))
    assert files, room
    bad = {
        str(f.relative_to(REPO_ROOT)): sorted(imported_roots(f) & FORBIDDEN[room])
        for f in files
        if imported_roots(f) & FORBIDDEN[room]
    }
    assert not bad, f"{room} imports what it must not: {bad}"


def test_the_checker_sees_a_violation(tmp_path: Path) -> None:
    f = tmp_path / "x.py"
    f.write_text("import streamlit as st\nfrom dashboard.services import data\nfrom . import sibling\n")
    assert imported_roots(f) == {"streamlit", "dashboard"}
