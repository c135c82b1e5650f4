"""The FlashMLA draft-decode fix's sweeps (docs/results/2026-12-06-flashmla-draft-decode-context.md): the proof on
the mirror, its triton control, the cost on the shard and the real-weights sweep for users with trained MTP weights.
Their dry runs say which SGLang (patched or not) the launches would run and whether the known issue applies."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bench.sweep import expand, load_sweep
from tests.paths import REPO_ROOT

SWEEPS = REPO_ROOT / "sweeps"
PATCH = (
    REPO_ROOT / "scripts" / "offline-bundle" / "patches" / "flashmla-draft-decode-context-0.5.13.post1.patch"
)
PRISTINE = "LENGTH = 'seq_lens'\n"


def _site(tmp_path: Path, patched: bool) -> Path:
    """A minimal SGLang 0.5.13.post1 on PYTHONPATH: its version, and a patch record when `patched` (written by the
    real tool, over a stand-in file whose hashes the test patch carries)."""
    site = tmp_path / ("patched" if patched else "plain")
    attn = site / "sglang" / "srt" / "layers" / "attention"
    attn.mkdir(parents=True)
    (site / "sglang" / "__init__.py").write_text("")
    (site / "sglang" / "_version.py").write_text("__version__ = version = '0.5.13.post1'\n")
    (attn / "flashmla_backend.py").write_text(PRISTINE)
    if patched:
        text = PATCH.read_text()
        before = hashlib.sha256(PRISTINE.encode()).hexdigest()
        after_text = "LENGTH = 'seq_lens + i + 1'\n"
        after = hashlib.sha256(after_text.encode()).hexdigest()
        head = text.split("\n--- ", 1)[0].splitlines()
        head = [
            f"before-sha256: {before}"
            if h.startswith("before-sha256:")
            else f"after-sha256: {after}"
            if h.startswith("after-sha256:")
            else h
            for h in head
        ]
        file = "sglang/srt/layers/attention/flashmla_backend.py"
        body = f"--- a/{file}\n+++ b/{file}\n@@ -1 +1 @@\n-{PRISTINE}+{after_text}"
        patch = tmp_path / PATCH.name
        patch.write_text("\n".join(head) + "\n\n" + body)
        tool = REPO_ROOT / "scripts" / "offline-bundle" / "sglang_patch.py"
        subprocess.run([sys.executable, str(tool), "apply", str(site), str(patch)], check=True, timeout=60)
    return site


def _dry_run(sweep: Path, site: Path | None) -> tuple[int, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {"COLUMNS": "400"}
    if site is not None:
        env["PYTHONPATH"] = f"{site}:{REPO_ROOT}"
    done = subprocess.run(
        [sys.executable, "-m", "runners.cli", "run", str(sweep), "--dry-run"],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    return done.returncode, " ".join((done.stdout + done.stderr).split())


@pytest.mark.parametrize("name", ["flashmla-draft-fix-real-weights.yaml", "flashmla-draft-fix-proof.yaml"])
def test_unpatched_the_dry_run_warns_patched_it_says_fixed(tmp_path: Path, name: str) -> None:
    # No GPU (nor the sweep's model) here: each dry run says so and exits 2, as the run would.
    plain_rc, plain = _dry_run(SWEEPS / name, _site(tmp_path, patched=False))
    assert plain_rc == 2 and "would this run here? no" in plain, plain
    assert "SGLang patch: none (unpatched)" in plain
    assert (
        "SGLang 0.5.13.post1 (installed (read from its files)) has known issue flashmla-draft-decode-context"
        in plain
    )
    fixed_rc, fixed = _dry_run(SWEEPS / name, _site(tmp_path, patched=True))
    assert fixed_rc == 2 and "would this run here? no" in fixed, fixed
    assert "SGLang patch: flashmla-draft-decode-context (" in fixed
    assert "known issue flashmla-draft-decode-context is fixed on it" in fixed
    assert "has known issue flashmla-draft-decode-context" not in fixed


def test_the_real_weights_sweep_measures_real_acceptance_on_the_deployed_shape() -> None:
    spec = load_sweep(SWEEPS / "flashmla-draft-fix-real-weights.yaml")
    triton = load_sweep(SWEEPS / "flashmla-draft-fix-real-weights-triton.yaml")
    assert spec.server.tp == 8 and spec.server.load_format != "dummy"
    assert not spec.grid.accept_lengths, "acceptance must not be pinned: it is what the sweep measures"
    assert spec.workloads[0].dataset == "jsonl"  # real prompts: random ids say nothing of a trained head
    assert sorted({g.server.steps for g in expand(spec) if g.server.steps}) == [2, 3, 4]
    assert triton.server.attention_backend == "triton" and spec.server.attention_backend == "flashmla"
    assert (triton.model, triton.grid.steps, triton.grid.spec_modes, triton.workloads) == (
        spec.model,
        spec.grid.steps,
        spec.grid.spec_modes,
        spec.workloads,
    )


def test_the_cost_sweep_pins_acceptance_so_both_sglangs_run_the_same_cycles() -> None:
    spec = load_sweep(SWEEPS / "flashmla-draft-fix-cost.yaml")
    assert spec.model.endswith("deepseek-v3-tp8-shard-40l") and spec.server.load_format == "dummy"
    assert spec.grid.accept_lengths and not spec.grid.baseline
    assert sorted({g.server.spec_mode or "" for g in expand(spec)}) == ["v1", "v2"]


def test_the_reproduction_script_runs_both_sglangs_into_separate_databases() -> None:
    """`--resume` continues the latest run of a sweep in its database: the patched runs must never land in (and
    resume) the unpatched ones."""
    text = (REPO_ROOT / "scripts" / "flashmla_draft_fix.sh").read_text()
    assert shutil.which("bash") is not None
    assert (
        subprocess.run(["bash", "-n", str(REPO_ROOT / "scripts" / "flashmla_draft_fix.sh")]).returncode == 0
    )
    for db in ("proof-unpatched.db", "proof-patched.db", "proof-triton.db", "cost-$which.db"):
        assert f"$WORK/{db}" in text
