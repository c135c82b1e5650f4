"""A verb's module imports no other verb's module: what two verbs share lives in `runners/` (the comparison,
the sweep checks, the gate's printout), and `ci` runs `run` as a user would, through the CLI's verb table."""

from __future__ import annotations

import ast

from tests.paths import REPO_ROOT

COMMANDS = REPO_ROOT / "runners" / "commands"


def _imports_a_verb(tree: ast.AST) -> list[str]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("runners.commands"):
            found.append(node.module)
        elif isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.startswith("runners.commands")]
    return found


def test_no_verb_module_imports_another() -> None:
    bad = {
        f.name: found
        for f in sorted(COMMANDS.glob("*.py"))
        if (found := _imports_a_verb(ast.parse(f.read_text())))
    }
    assert not bad, bad


def test_the_check_sees_an_import() -> None:
    assert _imports_a_verb(
        ast.parse("from runners.commands.run import x\nimport runners.commands.compare")
    ) == [
        "runners.commands.run",
        "runners.commands.compare",
    ]
