"""scripts/offline-bundle/sglang_patch.py and the patches it applies: the shipped FlashMLA patch lands exactly on
the pinned release's file (as GNU patch and git would put it), and never on anything else."""

from __future__ import annotations

import hashlib
import json
import py_compile
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.fixtures.bench_serving_client import WAIT_TIMEOUT
from tests.fixtures.sglang_source import pinned_source
from tests.paths import REPO_ROOT

pytestmark = WAIT_TIMEOUT  # the SGLang source may come from the client CI is still installing

TOOL = REPO_ROOT / "scripts" / "offline-bundle" / "sglang_patch.py"
PATCH = (
    REPO_ROOT / "scripts" / "offline-bundle" / "patches" / "flashmla-draft-decode-context-0.5.13.post1.patch"
)
FILE = "sglang/srt/layers/attention/flashmla_backend.py"


def _tool(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["python3", str(TOOL), *map(str, args)], capture_output=True, text=True, timeout=60, check=False
    )


@pytest.fixture
def site(tmp_path: Path) -> Path:
    """A site tree holding the pinned release's flashmla_backend.py, as bootstrap.sh unpacks it."""
    target = tmp_path / "site" / FILE
    target.parent.mkdir(parents=True)
    shutil.copy(pinned_source() / "srt" / "layers" / "attention" / "flashmla_backend.py", target)
    return tmp_path / "site"


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_the_shipped_patch_applies_to_the_pinned_release_as_git_would(site: Path, tmp_path: Path) -> None:
    by_git = tmp_path / "git"
    shutil.copytree(site, by_git)
    subprocess.run(["git", "apply", str(PATCH)], cwd=by_git, check=True, capture_output=True, timeout=60)

    assert _tool("check", site, PATCH).returncode == 0
    done = _tool("apply", site, PATCH)
    assert done.returncode == 0, done.stderr
    assert "applied flashmla-draft-decode-context" in done.stdout
    assert (site / FILE).read_bytes() == (by_git / FILE).read_bytes()
    py_compile.compile(str(site / FILE), doraise=True)
    record = json.loads((site / "sglang" / "SPECBENCH_PATCH.json").read_text())
    assert record["patch"] == "flashmla-draft-decode-context" and record["release"] == "0.5.13.post1"
    assert record["files"][FILE]["after"] == _sha(site / FILE)
    assert record["patch_sha256"] == hashlib.sha256(PATCH.read_bytes()).hexdigest()


def test_the_patch_gives_each_draft_step_its_own_keys_in_both_paths(site: Path) -> None:
    """What the patch changes, read from the patched source: draft step i attends to seq_lens + i + 1 in the eager
    metadata, in the CUDA-graph metadata (a persistent buffer the captured kernels read) and in forward_decode."""
    original = (site / FILE).read_text()
    assert _tool("apply", site, PATCH).returncode == 0
    text = (site / FILE).read_text()
    assert "backend.draft_kv_extra = i + 1" in text
    assert text.count("seq_lens = seq_lens + self.draft_kv_extra") == 2  # eager and graph metadata
    assert "self.cuda_graph_cache_seqlens[:bs].copy_(seq_lens)" in text
    assert text.count("cache_seqlens=cache_seqlens,") == 2  # forward_decode, bf16 and FP8 KV
    # verify (TARGET_VERIFY) keeps adding num_draft_tokens, untouched
    assert text.count("+ self.num_draft_tokens") == original.count("+ self.num_draft_tokens") == 6


def test_a_patch_lands_only_on_the_file_it_was_made_against(site: Path) -> None:
    target = site / FILE
    target.write_text(target.read_text().replace("PAGE_SIZE = 64", "PAGE_SIZE = 64  # edited"))
    before = target.read_bytes()
    refused = _tool("apply", site, PATCH)
    assert refused.returncode == 2
    assert (
        "is not the file this patch was made against (sglang 0.5.13.post1); nothing changed" in refused.stderr
    )
    assert target.read_bytes() == before and not (site / "sglang" / "SPECBENCH_PATCH.json").exists()


def test_applying_twice_is_a_no_op_and_a_second_patch_is_refused(site: Path, tmp_path: Path) -> None:
    assert _tool("apply", site, PATCH).returncode == 0
    patched = (site / FILE).read_bytes()
    again = _tool("apply", site, PATCH)
    assert again.returncode == 0 and "already carries flashmla-draft-decode-context" in again.stdout
    assert (site / FILE).read_bytes() == patched
    other = tmp_path / "other.patch"
    other.write_text(
        PATCH.read_text().replace("specbench patch: flashmla-draft-decode-context", "specbench patch: x")
    )
    refused = _tool("apply", site, other)
    assert (
        refused.returncode == 2 and "already carries patch 'flashmla-draft-decode-context'" in refused.stderr
    )


def test_stale_bytecode_of_a_patched_file_is_removed(site: Path) -> None:
    cache = site / FILE.rsplit("/", 1)[0] / "__pycache__" / "flashmla_backend.cpython-312.pyc"
    cache.parent.mkdir()
    cache.write_bytes(b"old")
    assert _tool("apply", site, PATCH).returncode == 0
    assert not cache.exists()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n", "not a specbench patch"),
        ("specbench patch: p\nfile: x\n\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n", "no before-sha256"),
        ("specbench patch: p\n\n--- a/x\n@@ -1 +1 @@\n", "expected a '--- a/FILE' and '+++ b/FILE' pair"),
    ],
)
def test_a_malformed_patch_is_refused_in_one_line(tmp_path: Path, text: str, message: str) -> None:
    bad = tmp_path / "bad.patch"
    bad.write_text(text)
    done = _tool("apply", tmp_path, bad)
    assert done.returncode == 2 and message in done.stderr and "Traceback" not in done.stderr
