"""pins.py - the offline bundle's pin tables (pins/<release>.txt), for build_bundle.sh.

    python3 pins.py releases              the releases that have a table, oldest first
    python3 pins.py show RELEASE          check RELEASE's table and print its pins, one name==version a line
    python3 pins.py check SITE            check an installed site tree: every Requires-Dist between packages in
                                          it holds; print sglang's torch requirement (the host must meet it)
    python3 pins.py extras REPORT SKIP    the packages of a `pip install --report` to add as extras, minus SKIP

Runs on any Python 3.8+ with pip (it borrows pip's vendored `packaging` where `packaging` is not installed) and
never touches the network, so the tables can be checked anywhere (tests/test_offline_bundle.py).
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
import sys
from email.parser import Parser
from pathlib import Path

try:
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.version import InvalidVersion, Version
except ImportError:  # a bare interpreter with pip: use pip's copy
    from pip._vendor.packaging.requirements import InvalidRequirement, Requirement  # type: ignore[no-redef,assignment]
    from pip._vendor.packaging.version import InvalidVersion, Version  # type: ignore[no-redef,assignment]

PINS_DIR = Path(os.environ.get("BUNDLE_PINS_DIR") or Path(__file__).resolve().parent / "pins")
# The wheels every bundle is built around; build_bundle.sh caches them apart from the small ones.
BIG = ("sglang", "sglang-kernel", "flashinfer-python")
RELEASE_RE = re.compile(r"^[0-9][0-9A-Za-z.+-]*$")
PIN_RE = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)$")
# The offline host's interpreter and platform (CPython 3.12, manylinux x86_64): how Requires-Dist markers read.
TARGET_ENV = {
    "python_version": "3.12",
    "python_full_version": "3.12.3",
    "implementation_name": "cpython",
    "platform_python_implementation": "CPython",
    "sys_platform": "linux",
    "platform_system": "Linux",
    "platform_machine": "x86_64",
    "os_name": "posix",
    "extra": "",
}


class PinError(Exception):
    """A table that build_bundle.sh must refuse; the message says where and why."""


def norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def releases() -> list[str]:
    found = [p.stem for p in PINS_DIR.glob("*.txt") if RELEASE_RE.match(p.stem)]
    return sorted(found, key=_version_key)


def _version_key(release: str) -> tuple[int, Version | str]:
    try:
        return (0, Version(release))
    except InvalidVersion:
        return (1, release)


def load(release: str) -> list[tuple[str, str]]:
    """RELEASE's pins as (name, version), in table order; PinError for anything build_bundle.sh cannot use."""
    if not RELEASE_RE.match(release):
        raise PinError(f"bad release name {release!r} (expected a version such as 0.5.12)")
    path = PINS_DIR / f"{release}.txt"
    if not path.is_file():
        known = ", ".join(releases()) or "none"
        raise PinError(f"no pin table for sglang {release} (known releases: {known}; add {path})")
    pins: list[tuple[str, str]] = []
    seen: dict[str, int] = {}
    for lineno, raw in enumerate(path.read_text().splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        where = f"{path.name}:{lineno}"
        m = PIN_RE.match(line)
        if not m:
            raise PinError(f"{where}: {line!r} is not an exact pin (name==version)")
        name, version = m.groups()
        try:
            Version(version)
        except InvalidVersion:
            raise PinError(f"{where}: {version!r} is not a valid version") from None
        key = norm(name)
        if key in seen:
            raise PinError(f"{where}: {name} is pinned twice (first on line {seen[key]})")
        seen[key] = lineno
        pins.append((name, version))
    missing = [b for b in BIG if b not in seen]
    if missing:
        raise PinError(f"{path.name}: missing {', '.join(missing)} (every bundle needs {', '.join(BIG)})")
    sglang = dict((norm(n), v) for n, v in pins)["sglang"]
    if Version(sglang) != Version(release):
        raise PinError(f"{path.name}: pins sglang=={sglang}, but the table is for {release}")
    return pins


def _dists(site: Path) -> dict[str, tuple[str, str, list[str]]]:
    """norm(name) -> (name, version, Requires-Dist lines) for every *.dist-info in SITE."""
    out = {}
    for info in sorted(site.glob("*.dist-info")):
        meta = Parser().parsestr((info / "METADATA").read_text(encoding="utf-8", errors="replace"))
        out[norm(meta["Name"])] = (meta["Name"], meta["Version"], meta.get_all("Requires-Dist") or [])
    return out


def check_site(site: Path) -> tuple[list[str], str]:
    """(conflicts, sglang's torch requirement) of an installed site tree.

    A conflict is a Requires-Dist of one bundled package on another bundled package that the bundled version
    does not meet (sglang's == pins included). Requirements on packages outside the bundle are the host's.
    """
    dists = _dists(site)
    conflicts: list[str] = []
    torch_req = ""
    for key, (name, version, requires) in dists.items():
        for line in requires:
            try:
                req = Requirement(line)
            except InvalidRequirement:
                continue  # a malformed line in someone's METADATA is not ours to judge
            if req.marker is not None and not req.marker.evaluate(TARGET_ENV):
                continue
            dep = norm(req.name)
            if key == "sglang" and dep == "torch":
                torch_req = f"torch{req.specifier}"
            if dep in dists and not req.specifier.contains(dists[dep][1], prereleases=True):
                conflicts.append(
                    f"{name} {version} requires {line.split(';')[0].strip()}, the bundle has {dists[dep][1]}"
                )
    return conflicts, torch_req


def extras(report: Path, skip: list[str]) -> tuple[list[str], list[str]]:
    """(name==version to add, name==version skipped) from `pip install --dry-run --report` output."""
    pats = [norm(s) for s in skip]
    add: list[str] = []
    skipped: list[str] = []
    for item in json.loads(report.read_text())["install"]:
        n, v = item["metadata"]["name"], item["metadata"]["version"]
        (skipped if any(fnmatch.fnmatch(norm(n), p) for p in pats) else add).append(f"{n}=={v}")
    return add, skipped


def main(argv: list[str]) -> int:
    cmd, args = (argv[0], argv[1:]) if argv else ("", [])
    try:
        if cmd == "releases" and not args:
            print("\n".join(releases()))
        elif cmd == "show" and len(args) == 1:
            print("\n".join(f"{n}=={v}" for n, v in load(args[0])))
        elif cmd == "check" and len(args) == 1:
            conflicts, torch_req = check_site(Path(args[0]))
            if conflicts:
                print("pins disagree with the bundled packages' requirements:", file=sys.stderr)
                print("\n".join(f"  {c}" for c in conflicts), file=sys.stderr)
                return 1
            print(torch_req)
        elif cmd == "extras" and len(args) == 2:
            add, skipped = extras(Path(args[0]), args[1].split())
            for s in skipped:
                print(f"skipping {s} (the host or the bundle provides it)", file=sys.stderr)
            print("\n".join(add))
        else:
            print(__doc__, file=sys.stderr)
            return 2
    except PinError as e:
        print(f"pins: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
