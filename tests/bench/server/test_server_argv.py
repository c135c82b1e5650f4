"""Server argv from configs: a fixed program, one element per value, version-aware flag spellings."""

from __future__ import annotations

import os
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from bench.server.argv import ArgvError, build_argv, program, resolve_python, sim_env, translate_args
from bench.sweep import ServerConfig, SimSettings, expand, parse_sweep

SPEC = ServerConfig(
    model="/models/tiny_dsv3",
    draft_model=None,
    attention_backend="flashmla",
    tp=1,
    algorithm="EAGLE",
    steps=3,
    topk=1,
    draft_tokens=4,
    spec_mode="v1",
)
BASELINE = replace(SPEC, algorithm=None, steps=None, topk=None, draft_tokens=None, spec_mode=None)


def flag_value(argv: list[str], flag: str) -> str:
    return argv[argv.index(flag) + 1]


def test_sglang_argv_shape() -> None:
    built = build_argv(SPEC, backend="sglang", version="0.5.13.post1", port=30000)
    argv = built.argv
    assert argv[:3] == [sys.executable, "-m", "sglang.launch_server"]
    assert flag_value(argv, "--model-path") == "/models/tiny_dsv3"
    assert flag_value(argv, "--host") == "127.0.0.1"
    assert flag_value(argv, "--port") == "30000"
    assert flag_value(argv, "--attention-backend") == "flashmla"
    assert flag_value(argv, "--tp-size") == "1"
    assert flag_value(argv, "--speculative-algorithm") == "EAGLE"
    assert flag_value(argv, "--speculative-num-steps") == "3"
    assert flag_value(argv, "--speculative-eagle-topk") == "1"
    assert flag_value(argv, "--speculative-num-draft-tokens") == "4"
    assert "--speculative-draft-model-path" not in argv
    assert "--disable-overlap-schedule" in argv
    assert built.mode_env == {"SGLANG_ENABLE_SPEC_V2": "False"}
    assert all(isinstance(a, str) for a in argv)


def test_sim_argv_uses_the_same_flags() -> None:
    real = build_argv(SPEC, backend="sglang", version="0.5.14", port=1234).argv
    sim = build_argv(SPEC, backend="sim", version="0.5.14", port=1234).argv
    assert sim[:3] == [sys.executable, "-m", "synthetic.server"]
    assert sim[3:] == real[3:]


def test_v2_and_baseline() -> None:
    v2 = build_argv(replace(SPEC, spec_mode="v2"), backend="sglang", version="0.5.12", port=1)
    assert "--disable-overlap-schedule" not in v2.argv
    assert v2.mode_env == {"SGLANG_ENABLE_SPEC_V2": "True"}
    v2_new = build_argv(replace(SPEC, spec_mode="v2"), backend="sglang", version="0.5.23", port=1)
    assert v2_new.mode_env == {}
    base = build_argv(BASELINE, backend="sglang", version="0.5.13", port=1)
    assert not any(a.startswith("--speculative") for a in base.argv)
    assert "--disable-overlap-schedule" not in base.argv
    assert base.mode_env == {}


def test_draft_model_path_and_nextn() -> None:
    cfg = replace(SPEC, algorithm="NEXTN", draft_model="/models/draft")
    argv = build_argv(cfg, backend="sglang", version="0.5.13", port=1).argv
    assert flag_value(argv, "--speculative-algorithm") == "NEXTN"
    assert flag_value(argv, "--speculative-draft-model-path") == "/models/draft"


def test_passthrough_bools_lists_and_numbers() -> None:
    cfg = replace(
        SPEC,
        args=(
            ("skip-tokenizer-init", True),
            ("enable-metrics", False),
            ("mem-fraction-static", 0.5),
            ("max-running-requests", 64),
            ("cuda-graph-bs", (1, 2, 4, 8)),  # type: ignore[arg-type]
            ("grammar-backend", "none"),
        ),
    )
    argv = build_argv(cfg, backend="sglang", version="0.5.13", port=1).argv
    assert "--skip-tokenizer-init" in argv
    assert "--enable-metrics" not in argv
    assert flag_value(argv, "--mem-fraction-static") == "0.5"
    assert flag_value(argv, "--max-running-requests") == "64"
    i = argv.index("--cuda-graph-bs")
    assert argv[i + 1 : i + 5] == ["1", "2", "4", "8"]
    assert flag_value(argv, "--grammar-backend") == "none"


def test_value_with_shell_metacharacters_stays_one_element() -> None:
    cfg = replace(SPEC, args=(("served-model-name", "x; rm -rf / $(id)"),))
    argv = build_argv(cfg, backend="sglang", version="0.5.13", port=1).argv
    assert flag_value(argv, "--served-model-name") == "x; rm -rf / $(id)"


@pytest.mark.parametrize(
    ("version", "given", "sent"),
    [
        ("0.5.12", "cuda-graph-max-bs", "--cuda-graph-max-bs"),
        ("0.5.13.post1", "cuda-graph-max-bs", "--cuda-graph-max-bs"),
        ("0.5.13", "cuda-graph-max-bs-decode", "--cuda-graph-max-bs"),
        ("0.5.14", "cuda-graph-max-bs", "--cuda-graph-max-bs-decode"),
        ("0.5.15", "cuda-graph-max-bs", "--cuda-graph-max-bs-decode"),
        # By 0.5.23 the old spelling is an ambiguous prefix of -decode and -prefill: argparse would refuse it.
        ("0.5.23", "cuda-graph-max-bs", "--cuda-graph-max-bs-decode"),
        ("0.5.23", "cuda-graph-max-bs-decode", "--cuda-graph-max-bs-decode"),
        ("0.5.23", "cuda-graph-bs", "--cuda-graph-bs-decode"),
    ],
)
def test_cuda_graph_flag_spelling_per_version(version: str, given: str, sent: str) -> None:
    cfg = replace(SPEC, args=((given, 8),))
    built = build_argv(cfg, backend="sglang", version=version, port=1)
    assert flag_value(built.argv, sent) == "8"
    stale = {"--cuda-graph-max-bs", "--cuda-graph-max-bs-decode", "--cuda-graph-bs", "--cuda-graph-bs-decode"}
    assert not (stale - {sent}) & set(built.argv)
    assert bool(built.notes) == (f"--{given}" != sent)


def test_both_spellings_of_one_flag_are_refused() -> None:
    cfg = replace(SPEC, args=(("cuda-graph-max-bs", 8), ("cuda-graph-max-bs-decode", 16)))
    with pytest.raises(ArgvError, match="same SGLang flag"):
        build_argv(cfg, backend="sglang", version="0.5.23", port=1)


@pytest.mark.parametrize(
    "name", ["port", "model-path", "speculative-num-steps", "disable-overlap-schedule", "tp", "host"]
)
def test_owned_flags_are_refused(name: str) -> None:
    cfg = replace(SPEC, args=((name, "1"),))
    with pytest.raises(ArgvError, match="set by the sweep"):
        build_argv(cfg, backend="sglang", version="0.5.13", port=1)


@pytest.mark.parametrize(
    ("args", "match"),
    [
        ((("--mem-fraction-static", 0.5),), "without leading dashes"),
        ((("no-such-flag", 1),), "unknown SGLang flag"),
        ((("served-model-name", "--port=1"),), "must not start with '-'"),
        ((("served-model-name", "a\nb"),), "NUL or newline"),
        ((("mem-fraction-static", float("nan")),), "finite"),
        ((("cuda-graph-bs", ()),), "empty list"),
    ],
)
def test_bad_passthrough_args(args: tuple, match: str) -> None:
    with pytest.raises(ArgvError, match=match):
        build_argv(replace(SPEC, args=args), backend="sglang", version="0.5.13", port=1)


def test_every_problem_is_listed_at_once() -> None:
    cfg = replace(SPEC, model="-evil", attention_backend="flash mla", args=(("nope", 1),))
    with pytest.raises(ArgvError) as e:
        build_argv(cfg, backend="sglang", version="0.5.13", port=0)
    assert len(e.value.problems) == 4


@pytest.mark.parametrize(
    ("backend", "version", "match"),
    [
        ("cutlass_mla", "0.5.23", "removed"),
        ("dsa", "0.5.12", "does not exist"),
        ("qsa", "0.5.15", "does not exist"),
    ],
)
def test_attention_backend_availability(backend: str, version: str, match: str) -> None:
    with pytest.raises(ArgvError, match=match):
        build_argv(replace(SPEC, attention_backend=backend), backend="sglang", version=version, port=1)


def test_incomplete_spec_config_is_refused() -> None:
    with pytest.raises(ArgvError, match="steps"):
        build_argv(replace(SPEC, steps=None), backend="sglang", version="0.5.13", port=1)
    with pytest.raises(ArgvError, match="spec_mode"):
        build_argv(replace(SPEC, spec_mode=None), backend="sglang", version="0.5.13", port=1)
    with pytest.raises(ArgvError, match="baseline"):
        build_argv(replace(BASELINE, spec_mode="v1"), backend="sglang", version="0.5.13", port=1)


def test_unreadable_version_is_refused() -> None:
    with pytest.raises(ArgvError, match="cannot read"):
        build_argv(SPEC, backend="sglang", version="latest", port=1)


def test_python_must_be_an_interpreter(tmp_path: Path) -> None:
    assert resolve_python(None) == sys.executable
    assert resolve_python(sys.executable) == sys.executable
    assert program("sglang", sys.executable) == [sys.executable, "-m", "sglang.launch_server"]
    with pytest.raises(ArgvError, match="must be a Python interpreter"):
        resolve_python("/bin/sh")
    with pytest.raises(ArgvError, match="not an executable"):
        resolve_python(str(tmp_path / "python3"))
    fake = tmp_path / "python3"
    fake.write_text("")
    os.chmod(fake, 0o644)
    with pytest.raises(ArgvError, match="not an executable"):
        resolve_python(str(fake))
    # The sim always runs on specbench's own interpreter, whatever server.python says.
    assert program("sim", "/bin/sh")[0] == sys.executable


def test_sim_env_from_settings() -> None:
    env = sim_env(
        SimSettings(version="0.5.12", acceptance_rate=0.5, seed=7, instant=True, fault="crash_after=3")
    )
    assert env == {
        "SPECBENCH_SIM_VERSION": "0.5.12",
        "SPECBENCH_SIM_ACCEPTANCE_RATE": "0.5",
        "SPECBENCH_SIM_SEED": "7",
        "SPECBENCH_SIM_TIME_SCALE": "1.0",
        "SPECBENCH_SIM_INSTANT": "1",
        "SPECBENCH_SIM_STARTUP_S": "0.2",
        "SPECBENCH_SIM_FAULT": "crash_after=3",
    }
    assert "SPECBENCH_SIM_FAULT" not in sim_env(SimSettings())


def test_translate_args_accepts_a_mapping() -> None:
    argv, notes = translate_args({"cuda-graph-max-bs": 8, "disable-radix-cache": True}, "0.5.14")
    assert argv == ["--cuda-graph-max-bs-decode", "8", "--disable-radix-cache"]
    assert notes == ["--cuda-graph-max-bs passed as --cuda-graph-max-bs-decode for SGLang 0.5.14"]


def test_configs_from_a_sweep_file_build() -> None:
    sweep = parse_sweep(
        """
name: t
model: /models/tiny_dsv3
server: {backend: sim, args: {cuda-graph-max-bs: 8, skip-tokenizer-init: true}}
grid: {batch_sizes: [1, 8], steps: [1, 3]}
"""
    )
    for group in expand(sweep):
        argv = build_argv(group.server, backend="sim", version="0.5.23", port=1).argv
        assert "--cuda-graph-max-bs-decode" in argv
        assert ("--disable-overlap-schedule" in argv) == (group.server.spec_mode == "v1")
