"""Every "contract §x" citation in code, tests and docs resolves to a section of docs/reference/sglang-contract.md."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "reference" / "sglang-contract.md"
# "contract §3.4", "contract §6.1-6.2", "contract §2, §3, §7", "sglang-contract.md §1.4-1.5"
CITATION = re.compile(r"contract(?:\.md)?,?\s+(§\d+(?:\.\d+)?(?:\s*(?:[-–]|,\s*§|and\s+§)\s*\d+(?:\.\d+)?)*)")
SECTION = re.compile(r"^#{2,3} (\d+(?:\.\d+)?)[. ]", re.MULTILINE)


def sections() -> set[str]:
    return set(SECTION.findall(DOC.read_text()))


def citations() -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for path in sorted(ROOT.rglob("*")):
        if path.suffix not in (".py", ".md", ".sh", ".yaml", ".toml") or ".git" in path.parts or path == DOC:
            continue
        if any(part in (".venv", "node_modules") for part in path.parts):
            continue
        for match in CITATION.finditer(path.read_text(errors="replace")):
            numbers = set(re.findall(r"\d+(?:\.\d+)?", match.group(1)))
            found.setdefault(str(path.relative_to(ROOT)), set()).update(numbers)
    return found


def test_every_contract_citation_resolves() -> None:
    known = sections()
    cited = citations()
    assert len(cited) >= 20, "the citation pattern stopped matching the code's comments"
    missing = {f: sorted(n - known) for f, n in cited.items() if n - known}
    assert not missing, f"citations of sections that do not exist: {missing}"


def test_the_doc_has_the_sections_the_code_leans_on() -> None:
    assert {"1.2", "1.4", "1.5", "3.4", "5.1", "6.9"} <= sections()
    assert "7" in sections() and "99" not in sections()


def test_the_pattern_reads_ranges_and_lists() -> None:
    text = "see contract §6.1-6.2 and (contract §2, §3, §7); docs/reference/sglang-contract.md §1.4-1.5"
    numbers = {n for m in CITATION.finditer(text) for n in re.findall(r"\d+(?:\.\d+)?", m.group(1))}
    assert numbers == {"6.1", "6.2", "2", "3", "7", "1.4", "1.5"}
