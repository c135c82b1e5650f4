"""Provenance on a CPU box: every key present, no GPU reported as "none", versions as strings, overrides."""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path

import pytest

from bench import provenance
from bench.model_config import model_config_problem
from bench.provenance import collect_provenance
from synthetic import model as synth

# The keys runners/store.py maps onto columns of `runs`, plus the simulated flag.
COLUMN_KEYS = {
    "sglang_version",
    "sglang_commit",
    "sgl_kernel_version",
    "flashinfer_version",
    "flash_mla_source",
    "torch_version",
    "cuda_version",
    "driver_version",
    "gpu_name",
    "gpu_count",
    "host",
    "model_identity",
    "specbench_version",
    "git_commit",
    "simulated",
}
VERSION_KEYS = (
    "sglang_version",
    "sgl_kernel_version",
    "flashinfer_version",
    "flash_mla_source",
    "torch_version",
    "cuda_version",
    "driver_version",
    "specbench_version",
    "python_version",
)


def _fake_dist(site: Path, name: str, version: str, files: list[str], direct_url: dict | None = None) -> None:
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    (info / "RECORD").write_text("".join(f"{f},,\n" for f in files))
    if direct_url is not None:
        (info / "direct_url.json").write_text(json.dumps(direct_url))


@pytest.fixture
def no_nvidia_smi(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    empty = tmp_path / "emptybin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))


def test_keys_present_and_types() -> None:
    prov = collect_provenance()
    assert not COLUMN_KEYS - prov.keys()
    for key in VERSION_KEYS:
        assert isinstance(prov[key], str) and prov[key], key
    assert isinstance(prov["gpu_count"], int)
    assert prov["simulated"] is False
    assert prov["model_identity"] is None
    assert prov["specbench_version"]  # installed metadata, or the 0.1.0 fallback


def test_cpu_box_reports_no_gpu(no_nvidia_smi: None) -> None:
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has a CUDA GPU")
    prov = collect_provenance()
    assert (prov["gpu_name"], prov["gpu_count"], prov["driver_version"]) == ("none", 0, "none")
    assert prov["cuda_version"] == (torch.version.cuda or "none")


def test_cuda_version_is_read_without_importing_torch(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A CUDA build's version.py is read as it stands; importing this torch would fail the run."""
    fake = tmp_path / "site" / "torch"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise RuntimeError('provenance imported torch')\n")
    (fake / "version.py").write_text(
        "from typing import Optional\n__version__ = '2.9.1+cu128'\ncuda: Optional[str] = '12.8'\nhip = None\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    monkeypatch.delitem(sys.modules, "torch", raising=False)  # an earlier test's torch would answer instead
    assert collect_provenance()["cuda_version"] == "12.8"
    (fake / "version.py").write_text("__version__ = '2.13.0+cpu'\ncuda = None\n")  # a CPU build
    assert collect_provenance()["cuda_version"] == "none"


def test_nvidia_smi_is_parsed(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    smi = bindir / "nvidia-smi"
    smi.write_text("#!/bin/sh\nprintf '0, NVIDIA H200, 580.159.04\\n1, NVIDIA H200, 580.159.04\\n'\n")
    smi.chmod(smi.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", str(bindir))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert provenance.gpu_info() == ("NVIDIA H200", 2, "580.159.04")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    assert provenance.gpu_info() == ("NVIDIA H200", 1, "580.159.04")


def test_provenance_describes_the_assigned_gpus_not_the_host(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A worker started with `--gpus 0` on an 8-GPU host runs x1 servers: its points belong to an x1 series."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    smi = bindir / "nvidia-smi"
    rows = "".join(f"{i}, NVIDIA H200, 580.159.04\\n" for i in range(8))
    smi.write_text(f"#!/bin/sh\nprintf '{rows}'\n")
    smi.chmod(smi.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", str(bindir))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert collect_provenance()["gpu_count"] == 8
    prov = collect_provenance(gpus=[0])
    assert (prov["gpu_name"], prov["gpu_count"], prov["driver_version"]) == ("NVIDIA H200", 1, "580.159.04")
    assert collect_provenance(gpus=[2, 5])["gpu_count"] == 2


def test_server_info_version_wins_and_sim_marks_simulated() -> None:
    prov = collect_provenance(server_info={"version": "0.5.13.post1", "attention_backend": "flashmla"})
    assert prov["sglang_version"] == "0.5.13.post1"
    assert prov["sglang_version_source"] == "server_info"
    assert prov["simulated"] is False
    sim = collect_provenance(server_info={"version": "0.5.14", "specbench_sim": {"stand_in": True}})
    assert sim["sglang_version"] == "0.5.14" and sim["simulated"] is True


def test_installed_gpu_stack_is_read_from_metadata(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    site = tmp_path / "site"
    _fake_dist(
        site,
        "sglang",
        "0.5.13.post1",
        ["sglang/__init__.py"],
        {"url": "x", "vcs_info": {"commit_id": "abc123"}},
    )
    _fake_dist(site, "sglang-kernel", "0.4.3", ["sgl_kernel/__init__.py", "sgl_kernel/flash_mla.py"])
    _fake_dist(site, "flashinfer-python", "0.6.12", ["flashinfer/__init__.py"])
    monkeypatch.syspath_prepend(str(site))
    prov = collect_provenance()
    assert prov["sglang_version"] == "0.5.13.post1" and prov["sglang_version_source"] == "package"
    assert prov["sglang_commit"] == "abc123"
    assert prov["sgl_kernel_version"] == "0.4.3"
    assert prov["flashinfer_version"] == "0.6.12"
    assert prov["flash_mla_source"] == "sglang-kernel 0.4.3"
    # the server's own version still wins over the local package
    assert collect_provenance(server_info={"version": "0.5.15"})["sglang_version"] == "0.5.15"


def test_separate_flash_mla_package_wins(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    site = tmp_path / "site"
    _fake_dist(site, "sgl-kernel", "0.5.0", ["sgl_kernel/__init__.py"])
    monkeypatch.syspath_prepend(str(site))
    assert provenance.flash_mla_source() == "none"  # a kernel package without FlashMLA inside
    _fake_dist(site, "sgl-flash-mla", "1.0.0", ["sgl_flash_mla/__init__.py"])
    assert provenance.flash_mla_source() == "sgl-flash-mla 1.0.0"


def test_git_commit_absent_and_env_fallback(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(provenance, "_specbench_root", lambda: tmp_path)
    monkeypatch.delenv(provenance.COMMIT_ENV, raising=False)
    assert provenance.git_commit() == (None, None)
    monkeypatch.setenv(provenance.COMMIT_ENV, "deadbeef")
    assert collect_provenance()["git_commit"] == "deadbeef"


def test_model_identity(tmp_path: Path) -> None:
    a = synth.build_checkpoint(tmp_path / "a", hidden=128, heads=2, vocab=64, seed=0)
    b = synth.build_checkpoint(tmp_path / "b", hidden=128, heads=2, vocab=64, seed=1)
    pa, pb = collect_provenance(str(a)), collect_provenance(str(b))
    assert pa["model_architectures"] == "DeepseekV3ForCausalLM"
    assert str(pa["model_identity"]).startswith("DeepseekV3ForCausalLM@")
    assert pa["model_identity"] != pb["model_identity"]  # same config and sizes, other weights
    assert collect_provenance(str(a))["model_identity"] == pa["model_identity"]
    assert "agree seed=0" in str(pa["model_synth"])
    remote = collect_provenance("deepseek-ai/DeepSeek-V3")
    assert remote["model_identity"] == "deepseek-ai/DeepSeek-V3" and remote["model_hash"] is None


@pytest.mark.timeout(30)
def test_a_checkpoints_hostile_json_files_are_read_bounded(tmp_path: Path) -> None:
    """Issue 35: a FIFO weight index hung the run (after its servers started); a deep manifest traced back."""
    model = tmp_path / "m"
    model.mkdir()
    (model / "config.json").write_text('{"architectures": ["LlamaForCausalLM"]}')
    os.mkfifo(model / "model.safetensors.index.json")
    (model / "specbench_synth.json").write_text("[" * 100_000 + "]" * 100_000)
    info = provenance.model_info(str(model))
    assert info["model_architectures"] == "LlamaForCausalLM" and info["model_synth"] is None
    long = "/" + "a" * 300  # a name too long for the file system: an id, not an OSError
    assert provenance.model_info(long)["model_path"] == long and model_config_problem(long) is None


def test_cpu_topology_groups_smt_siblings(tmp_path: Path) -> None:
    # A 4-CPU host with two cores of two hyperthreads each, as /sys lists it (each CPU names its core's group).
    for cpu, group in {0: "0,2", 1: "1,3", 2: "0,2", 3: "1,3", 10: "10-11", 11: "10-11"}.items():
        d = tmp_path / "cpu" / f"cpu{cpu}" / "topology"
        d.mkdir(parents=True)
        (d / "thread_siblings_list").write_text(group + "\n")
    (tmp_path / "cpu" / "cpufreq").mkdir()  # not a CPU
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nmodel name\t: Intel(R) Xeon(R) Platinum 8480C\n")
    topo = provenance.cpu_topology(tmp_path / "cpu", info)
    assert topo["cpu_smt_groups"] == "0,2 1,3 10-11"
    assert topo["cpu_model"] == "Intel(R) Xeon(R) Platinum 8480C"
    empty = provenance.cpu_topology(tmp_path / "none", tmp_path / "none")
    assert empty["cpu_smt_groups"] is None and empty["cpu_model"] is None
    here = collect_provenance()  # this host: every CPU in exactly one group
    if here["cpu_smt_groups"] is not None:
        listed = [c for g in str(here["cpu_smt_groups"]).split() for c in g.split(",") if "-" not in g]
        assert len(listed) == len(set(listed))
