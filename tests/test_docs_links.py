"""Every relative link in the README and docs/ resolves: the file (or folder) exists, and a `#anchor` names a
heading of the file it points into, spelled as GitHub spells heading anchors."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
from markdown_it import MarkdownIt
from markdown_it.token import Token

from tests.paths import REPO_ROOT

_MD = MarkdownIt("commonmark").enable("table")


def doc_files(root: Path = REPO_ROOT) -> list[Path]:
    return [root / "README.md", *sorted((root / "docs").rglob("*.md"))]


def _walk(tokens: list[Token]) -> Iterator[Token]:
    for t in tokens:
        yield t
        if t.children:
            yield from _walk(t.children)


def links(text: str) -> list[str]:
    """Targets of the Markdown links and images in `text` (code spans and blocks hold none)."""
    out: list[str] = []
    for t in _walk(_MD.parse(text)):
        if t.type == "link_open":
            out.append(str(t.attrGet("href") or ""))
        elif t.type == "image":
            out.append(str(t.attrGet("src") or ""))
    return out


def slug(heading: str) -> str:
    """GitHub's anchor for a heading's text: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(text: str) -> set[str]:
    """The anchors of every heading in `text`, a repeated one numbered as GitHub numbers it (-1, -2, ...)."""
    tokens = _MD.parse(text)
    seen: dict[str, int] = {}
    out: set[str] = set()
    for i, t in enumerate(tokens):
        if t.type != "heading_open":
            continue
        inline = tokens[i + 1]
        words = "".join(c.content for c in _walk(inline.children or []) if c.type in ("text", "code_inline"))
        base = slug(words)
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


def broken_links(files: list[Path]) -> list[str]:
    """`file: target (why)` for every relative link among `files` that does not resolve."""
    problems: list[str] = []
    for f in files:
        for target in links(f.read_text(encoding="utf-8")):
            parts = urlsplit(target)
            if parts.scheme or parts.netloc:  # http(s), mailto: not this test's business
                continue
            path = f if not parts.path else (f.parent / unquote(parts.path)).resolve()
            if not path.exists():
                problems.append(f"{f}: {target} (no such file)")
            elif (
                parts.fragment
                and path.suffix == ".md"
                and unquote(parts.fragment) not in anchors(path.read_text(encoding="utf-8"))
            ):
                problems.append(f"{f}: {target} (no heading with that anchor)")
    return problems


def test_every_relative_link_in_the_readme_and_docs_resolves() -> None:
    files = doc_files()
    assert len(files) > 10 and all(f.is_file() for f in files)
    assert broken_links(files) == []


def test_docs_have_guides_reference_results_and_an_index() -> None:
    docs = REPO_ROOT / "docs"
    index = (docs / "README.md").read_text(encoding="utf-8")
    for folder in ("guide", "reference", "results"):
        pages = sorted((docs / folder).glob("*.md"))
        assert pages, folder
        for page in pages:  # the index lists every page
            assert f"({folder}/{page.name})" in index, page


@pytest.mark.parametrize(
    ("heading", "anchor"),
    [
        (
            "Results: what was measured, one dated page per experiment",
            "results-what-was-measured-one-dated-page-per-experiment",
        ),
        ("Pinning CPUs", "pinning-cpus"),
        (
            "specbench against SGLang's `bench_serving` on the same server",
            "specbench-against-sglangs-bench_serving-on-the-same-server",
        ),
    ],
)
def test_anchors_are_spelled_as_github_spells_them(heading: str, anchor: str) -> None:
    assert anchor in anchors(f"# Title\n\n## {heading}\n")


def test_the_checker_finds_what_is_broken(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("# A\n\n## Two words\n\n## Two words\n", encoding="utf-8")
    (tmp_path / "README.md").write_text(
        "[ok](docs/a.md) [ok](docs/a.md#two-words) [ok](docs/a.md#two-words-1) [ok](#b) [ok](docs)\n"
        "[web](https://example.com/missing) `[code](missing.md)`\n\n## B\n\n"
        "[gone](docs/b.md) [bad anchor](docs/a.md#three) ![img](docs/missing.png)\n",
        encoding="utf-8",
    )
    problems = broken_links(doc_files(tmp_path))
    assert [p.split(": ", 1)[1] for p in problems] == [
        "docs/b.md (no such file)",
        "docs/a.md#three (no heading with that anchor)",
        "docs/missing.png (no such file)",
    ]
