"""bench/server/sglang_patch.py: which specbench patch an installed SGLang carries, as the version probe reports
it from the server's interpreter. A record that no longer matches its files, or a pip install edited without
one, is reported as such, never as clean."""

from __future__ import annotations

import base64
import hashlib
import subprocess
import sys
from pathlib import Path

import pytest

from bench.server.launcher import probe_sglang
from tests.paths import REPO_ROOT

TOOL = REPO_ROOT / "scripts" / "offline-bundle" / "sglang_patch.py"
FILE = "sglang/srt/layers/attention/flashmla_backend.py"


def _patch(tmp_path: Path, before: str, after: str) -> Path:
    sha = {k: hashlib.sha256(v.encode()).hexdigest() for k, v in (("b", before), ("a", after))}
    path = tmp_path / "fix.patch"
    path.write_text(
        f"specbench patch: fix-draft\nrelease: 0.5.13.post1\nfile: {FILE}\nbefore-sha256: {sha['b']}\n"
        f"after-sha256: {sha['a']}\n\n--- a/{FILE}\n+++ b/{FILE}\n@@ -1 +1 @@\n-{before}+{after}"
    )
    return path


@pytest.fixture
def site(tmp_path: Path) -> Path:
    """A site tree with a minimal `sglang` package: its version and the file specbench patches."""
    root = tmp_path / "site"
    (root / FILE).parent.mkdir(parents=True)
    (root / "sglang" / "__init__.py").write_text("raise SystemExit('the probe must not import sglang')\n")
    (root / "sglang" / "version.py").write_text("__version__ = '0.5.13.post1'\n")
    (root / FILE).write_text("LENGTH = 'seq_lens'\n")
    return root


def _state(site: Path) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "bench.server.sglang_patch"],
        env={"PYTHONPATH": f"{site}:{REPO_ROOT}", "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return done.stdout.strip()


def test_unpatched_patched_and_changed_after_patching(site: Path, tmp_path: Path) -> None:
    assert _state(site) == '{"sglang_patch": "none"}'
    patch = _patch(tmp_path, "LENGTH = 'seq_lens'\n", "LENGTH = 'seq_lens + i + 1'\n")
    subprocess.run(["python3", str(TOOL), "apply", str(site), str(patch)], check=True, capture_output=True)
    sha = hashlib.sha256(patch.read_bytes()).hexdigest()[:12]
    assert _state(site) == f'{{"sglang_patch": "fix-draft ({sha})"}}'
    (site / FILE).write_text("LENGTH = 'something else'\n")
    assert _state(site) == f'{{"sglang_patch": "fix-draft ({sha}), then changed: {FILE}"}}'


def test_a_pip_install_edited_without_a_record_is_reported(site: Path) -> None:
    pristine = (site / FILE).read_bytes()
    digest = base64.urlsafe_b64encode(hashlib.sha256(pristine).digest()).rstrip(b"=").decode()
    dist = site / "sglang-0.5.13.post1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: sglang\nVersion: 0.5.13.post1\n")
    (dist / "RECORD").write_text(f"{FILE},sha256={digest},{len(pristine)}\n")
    assert _state(site) == '{"sglang_patch": "none"}'
    (site / FILE).write_text("LENGTH = 'hand edited'\n")
    assert _state(site) == f'{{"sglang_patch": "unrecorded change to {FILE}"}}'


def test_the_version_probe_reports_version_and_patch(
    site: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The probe runs in the server's interpreter with the server's environment (PYTHONPATH is how a bundle is
    found). A bundle has no dist-info, so the version comes from sglang.version (this package imports)."""
    (site / "sglang" / "__init__.py").write_text("")
    monkeypatch.setenv("PYTHONPATH", str(site))
    assert probe_sglang(sys.executable) == ("0.5.13.post1", "none")
    patch = _patch(tmp_path, "LENGTH = 'seq_lens'\n", "LENGTH = 'seq_lens + i + 1'\n")
    subprocess.run(["python3", str(TOOL), "apply", str(site), str(patch)], check=True, capture_output=True)
    version, state = probe_sglang(sys.executable)
    assert version == "0.5.13.post1" and state is not None and state.startswith("fix-draft (")


def test_no_sglang_is_no_answer_not_a_claim(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    assert _state(empty) == '{"sglang_patch": null}'
