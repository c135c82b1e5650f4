#!/usr/bin/env python3
"""Apply one specbench patch to an installed SGLang (a bundle's site tree or a site-packages directory).

    python3 sglang_patch.py apply SITE PATCH     patch SITE/sglang/..., record it in SITE/sglang/SPECBENCH_PATCH.json
    python3 sglang_patch.py check SITE PATCH     say whether it would apply; change nothing

A patch is a unified diff with a header (patches/*.patch): `specbench patch: NAME`, `release:`, and per file
`file:`, `before-sha256:`, `after-sha256:`. It applies only to the exact file it was made against (the
before-hash), hunk by hunk at the stated lines (no fuzz), and the result must hash to the after-hash: a patch
never half-applies and never lands on another release. The record it leaves is what specbench's version probe
reads (bench/server/sglang_patch.py), so every run on this SGLang says which patch it carried.
Standard library only: it runs on an offline GPU host before anything else is installed.
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

RECORD = "SPECBENCH_PATCH.json"  # inside the sglang package directory
_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


class PatchError(Exception):
    pass


@dataclass
class FilePatch:
    path: str
    hunks: list[tuple[int, list[str]]] = field(default_factory=list)  # (old start, body lines)


@dataclass
class Patch:
    name: str
    release: str
    sha256: str
    hashes: dict[str, tuple[str, str]]  # path -> (before, after)
    files: list[FilePatch]


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def parse(path: Path) -> Patch:
    raw = path.read_bytes()
    lines = raw.decode("utf-8").splitlines(keepends=True)
    header: dict[str, str] = {}
    hashes: dict[str, tuple[str, str]] = {}
    current: str | None = None
    files: list[FilePatch] = []
    i = 0
    while i < len(lines) and not lines[i].startswith("--- "):
        key, sep, value = lines[i].partition(":")
        if sep:
            key, value = key.strip(), value.strip()
            if key == "file":
                current = value
            elif key in ("before-sha256", "after-sha256") and current is not None:
                before, after = hashes.get(current, ("", ""))
                hashes[current] = (value, after) if key == "before-sha256" else (before, value)
            else:
                header.setdefault(key, value)
        i += 1
    while i < len(lines):
        if not lines[i].startswith("--- ") or i + 1 >= len(lines) or not lines[i + 1].startswith("+++ "):
            raise PatchError(f"{path.name}: line {i + 1}: expected a '--- a/FILE' and '+++ b/FILE' pair")
        target = lines[i + 1][4:].strip().split("\t")[0]
        fp = FilePatch(target[2:] if target.startswith("b/") else target)
        i += 2
        while i < len(lines) and lines[i].startswith("@@"):
            m = _HUNK.match(lines[i])
            if m is None:
                raise PatchError(f"{path.name}: line {i + 1}: not a hunk header")
            old_len = int(m.group(2) or 1)
            new_len = int(m.group(4) or 1)
            body: list[str] = []
            i += 1
            seen_old = seen_new = 0
            while seen_old < old_len or seen_new < new_len:
                if i >= len(lines):
                    raise PatchError(f"{path.name}: the hunk at line {m.group(0)} ends early")
                line = lines[i]
                tag = line[:1]
                if tag in (" ", "\n"):
                    seen_old += 1
                    seen_new += 1
                elif tag == "-":
                    seen_old += 1
                elif tag == "+":
                    seen_new += 1
                elif not line.startswith("\\"):
                    raise PatchError(f"{path.name}: line {i + 1}: unexpected {line[:20]!r} inside a hunk")
                body.append(line if tag != "\n" else " \n")
                i += 1
            fp.hunks.append((int(m.group(1)), body))
        files.append(fp)
    name = header.get("specbench patch")
    if not name or not files:
        raise PatchError(f"{path.name}: not a specbench patch (no 'specbench patch: NAME' header or no diff)")
    for fp in files:
        if fp.path not in hashes or not all(hashes[fp.path]):
            raise PatchError(f"{path.name}: no before-sha256/after-sha256 for {fp.path}")
    return Patch(name, header.get("release", "?"), _sha(raw), hashes, files)


def _apply_hunks(text: str, fp: FilePatch) -> str:
    old = text.splitlines(keepends=True)
    out: list[str] = []
    pos = 0  # next unread line of `old`
    for start, body in fp.hunks:
        want = [line[1:] for line in body if line[:1] in (" ", "-")]
        at = start - 1 if want else start
        if old[at : at + len(want)] != want:
            raise PatchError(f"{fp.path}: the hunk at line {start} does not match the file")
        out.extend(old[pos:at])
        out.extend(line[1:] for line in body if line[:1] in (" ", "+"))
        pos = at + len(want)
    out.extend(old[pos:])
    return "".join(out)


def plan(site: Path, patch: Patch) -> dict[str, bytes]:
    """The new content of every file the patch touches; raises PatchError when it cannot apply exactly."""
    record = read_record(site)
    if record is not None:
        if record.get("patch_sha256") == patch.sha256:
            return {}
        raise PatchError(f"{site} already carries patch {record.get('patch')!r}; start from a fresh copy")
    result: dict[str, bytes] = {}
    for fp in patch.files:
        target = site / fp.path
        if not target.is_file():
            raise PatchError(f"{target} does not exist: is {site} an sglang {patch.release} site tree?")
        data = target.read_bytes()
        before, after = patch.hashes[fp.path]
        if _sha(data) != before:
            raise PatchError(
                f"{fp.path} is not the file this patch was made against (sglang {patch.release}); nothing changed"
            )
        new = _apply_hunks(data.decode("utf-8"), fp).encode("utf-8")
        if _sha(new) != after:
            raise PatchError(f"{fp.path}: the patched file does not hash to the patch's after-sha256")
        result[fp.path] = new
    return result


def read_record(site: Path) -> dict[str, object] | None:
    record = site / "sglang" / RECORD
    return json.loads(record.read_text()) if record.is_file() else None


def apply(site: Path, patch_path: Path) -> str:
    patch = parse(patch_path)
    changes = plan(site, patch)
    if not changes:
        return f"sglang_patch: {site} already carries {patch.name}"
    for rel, data in changes.items():
        tmp = site / (rel + ".specbench-new")
        tmp.write_bytes(data)
        tmp.replace(site / rel)
        for cache in (site / rel).parent.glob(f"__pycache__/{Path(rel).stem}.*.pyc"):
            cache.unlink()  # a stale bytecode file must never run the unpatched code
    record = {
        "patch": patch.name,
        "patch_file": patch_path.name,
        "patch_sha256": patch.sha256,
        "release": patch.release,
        "files": {rel: {"before": b, "after": a} for rel, (b, a) in patch.hashes.items()},
    }
    (site / "sglang" / RECORD).write_text(json.dumps(record, indent=1) + "\n")
    return f"sglang_patch: applied {patch.name} ({patch.sha256[:12]}) to {site}"


def main(argv: list[str]) -> int:
    if len(argv) != 3 or argv[0] not in ("apply", "check"):
        print(__doc__.split("\n\n")[0], file=sys.stderr)
        return 2
    site, patch_path = Path(argv[1]), Path(argv[2])
    try:
        if argv[0] == "check":
            changes = plan(site, parse(patch_path))
            print(
                f"sglang_patch: {patch_path.name} {'applies' if changes else 'is already applied'} to {site}"
            )
        else:
            print(apply(site, patch_path))
    except (PatchError, OSError, UnicodeDecodeError, ValueError) as e:
        print(f"sglang_patch: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
