"""Which specbench patch the installed SGLang carries: "none", a patch's name, or what changed unrecorded.
scripts/offline-bundle/sglang_patch.py records a patch in `sglang/SPECBENCH_PATCH.json` with every file's
sha256 before and after; the files are re-hashed, so a stale record is reported, not trusted. Without one,
sglang's pip RECORD is checked for the paths specbench patches. Standard library only, never importing sglang:
the version probe runs this source in the server's interpreter."""

import base64
import hashlib
import importlib.util
import json
import os
import re
from importlib import metadata

UNPATCHED = "none"
RECORD_NAME = "SPECBENCH_PATCH.json"
# Files specbench has patches for: a pip install whose copy differs from its RECORD is reported as changed.
WATCHED = ("sglang/srt/layers/attention/flashmla_backend.py",)


def _sha256(path: str) -> str | None:
    try:
        with open(path, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()
    except OSError:
        return None


def _package_dir() -> str | None:
    spec = importlib.util.find_spec("sglang")  # finds, never executes, a top-level package
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    return locations[0] if locations else None


def _record_changes(site: str) -> list[str]:
    """Watched files whose content differs from the hash pip wrote in sglang's RECORD."""
    try:
        dist = metadata.distribution("sglang")
    except metadata.PackageNotFoundError:
        return []
    changed = []
    for f in dist.files or []:
        if str(f) not in WATCHED or f.hash is None or f.hash.mode != "sha256":
            continue
        have = _sha256(os.path.join(site, str(f)))
        want = base64.urlsafe_b64decode(f.hash.value + "==").hex()
        if have is not None and have != want:
            changed.append(str(f))
    return changed


def installed_patch() -> str | None:
    """The patch state of the sglang this interpreter would import; None when sglang is not importable."""
    try:
        package = _package_dir()
    except (ImportError, ValueError):
        return None
    if package is None:
        return None
    site = os.path.dirname(package)
    try:
        with open(os.path.join(package, RECORD_NAME)) as f:
            record = json.load(f)
        name = str(record["patch"])
        files = dict(record["files"])
        sha = str(record.get("patch_sha256", ""))[:12]
    except FileNotFoundError:
        changed = _record_changes(site)
        return f"unrecorded change to {', '.join(changed)}" if changed else UNPATCHED
    except (OSError, ValueError, KeyError, TypeError) as e:
        return f"unreadable {RECORD_NAME}: {type(e).__name__}"
    drifted = [rel for rel, h in files.items() if _sha256(os.path.join(site, rel)) != dict(h).get("after")]
    label = f"{name} ({sha})" if sha else name
    return f"{label}, then changed: {', '.join(drifted)}" if drifted else label


def source_version() -> str | None:
    """The version a metadata-less sglang (a bundle's tree) declares in `_version.py`, as text; or None."""
    try:
        package = _package_dir()
        with open(os.path.join(package or "", "_version.py")) as f:
            text = f.read()
    except (ImportError, ValueError, OSError):
        return None
    found = re.search(r"""^__version__\s*=\s*(?:version\s*=\s*)?['"]([^'"]+)['"]""", text, re.M)
    return found.group(1) if found else None


def is_patched(state: str | None) -> bool:
    return state not in (None, UNPATCHED)


if __name__ == "__main__":
    print(json.dumps({"sglang_patch": installed_patch()}))
