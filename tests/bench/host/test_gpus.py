"""GPU detection from nvidia-smi's CSV, and requirement matching."""

from __future__ import annotations

import pytest

from bench.host.gpus import NVIDIA_SMI_ARGV, Gpu, detect_gpus, parse_gpu_list, select_gpus
from runners.gpus import matches, parse_requires, requirements_for, requires_text, unmet

H100x2 = [Gpu(0, "NVIDIA H100 80GB HBM3"), Gpu(1, "NVIDIA H100 80GB HBM3")]


def test_detect_parses_nvidia_smi_with_a_fixed_argv() -> None:
    seen: list[list[str]] = []

    def fake(argv: list[str]) -> str:
        seen.append(argv)
        return "0, NVIDIA H200\n1, NVIDIA H200\n\n"

    assert detect_gpus(fake) == [Gpu(0, "NVIDIA H200"), Gpu(1, "NVIDIA H200")]
    assert seen == [NVIDIA_SMI_ARGV]


def test_detect_reads_each_boards_driver_and_uuid() -> None:
    out = "0, NVIDIA H100 80GB HBM3, 580.159.04, GPU-5f1c2a3b-0000-1111-2222-333344445555\n"
    (gpu,) = detect_gpus(lambda argv: out)
    assert (gpu.name, gpu.driver, gpu.uuid) == (
        "NVIDIA H100 80GB HBM3",
        "580.159.04",
        out.split(", ")[3].strip(),
    )


def test_detect_falls_back_when_nvidia_smi_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(argv: list[str]) -> str:
        raise OSError("no driver")

    monkeypatch.setattr("bench.host.gpus._torch_gpus", lambda: [])
    assert detect_gpus(broken) == []


def test_gpu_list_and_selection() -> None:
    assert parse_gpu_list(None) is None
    assert parse_gpu_list("0, 2") == [0, 2]
    for bad in ("0,x", "1,1", "-1"):
        with pytest.raises(ValueError):
            parse_gpu_list(bad)
    detected = [Gpu(0, "A"), Gpu(1, "B"), Gpu(2, "C")]
    assert select_gpus(detected, None) == detected
    assert select_gpus(detected, [2, 0]) == [Gpu(2, "C"), Gpu(0, "A")]
    assert select_gpus([], [3]) == [Gpu(3, "unknown")]


def test_parse_requires() -> None:
    assert parse_requires("gpu=H100,count=8") == {"gpu": "H100", "count": 8}
    assert parse_requires("labels=b+a") == {"labels": ["a", "b"]}
    assert parse_requires(None) == {}
    for bad in ("gpu", "count=0", "count=x", "vram=80", "gpu="):
        with pytest.raises(ValueError):
            parse_requires(bad)


def test_requires_text_reads_as_requires_is_written() -> None:
    # `specbench jobs` and `specbench schedule list` both show it; jobs once showed labels=['a', 'b'].
    text = "gpu=H100,count=8,labels=a+b"
    assert requires_text(parse_requires(text)) == text
    assert requires_text({}) == requires_text(None) == ""
    assert requires_text("edited by hand") == "edited by hand"


def test_matching() -> None:
    assert matches({}, [])
    assert matches({"gpu": "h100"}, H100x2)  # substring, any case
    assert matches({"gpu": "H100", "count": 2}, H100x2)
    assert unmet({"gpu": "H100", "count": 8}, H100x2) == "needs 8 x H100, has 2"
    assert unmet({"gpu": "H200"}, H100x2) == "needs one H200 GPU"
    assert unmet({"count": 1}, []) == "needs 1 GPU(s), has 0"
    assert matches({"count": 2}, H100x2)
    assert unmet({"labels": ["nightly"]}, [], ["x"]) == "needs worker label(s) nightly"
    assert matches({"labels": ["nightly"]}, [], ["nightly", "x"])


def test_requirements_for_real_servers() -> None:
    assert requirements_for("sglang", 8, {"gpu": "H100"}) == {"gpu": "H100", "count": 8}
    assert requirements_for("sglang", 1, {"count": 4}) == {"count": 4}
    assert requirements_for("sim", 8, {}) == {}
