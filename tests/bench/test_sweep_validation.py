"""Sweep validation: every problem in one pass, strict and bounded values, and YAML that cannot hurt the
host (issue 10 §7, issue 12 "Validation in one pass")."""

from __future__ import annotations

import math
import time
import tracemalloc
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bench.sweep import MAX_POINTS, SweepError, SweepSpec, expand, load_sweep, parse_sweep
from runners.cli import app
from tests.sweep_mutations import ALIAS_BOMB, mutated_sweeps

BASE = """\
name: t
model: sim-tiny
server: {backend: sim, attention_backend: flashmla}
grid: {batch_sizes: [1, 4], spec_modes: [v1, v2], steps: [1, 2, 3], topk: [1], baseline: true}
workload: {input_len: 32, output_len: 16}
repeats: 2
"""


def problems_of(text: str) -> list[str]:
    with pytest.raises(SweepError) as e:
        parse_sweep(text)
    return e.value.problems


def test_five_errors_are_reported_in_one_run_with_did_you_mean() -> None:
    text = (
        BASE.replace("batch_sizes: [1, 4]", "batch_sizes: [0, 4]")  # range
        .replace("steps: [1, 2, 3]", 'steps: "3"')  # strict type: a string is not a list of numbers
        .replace("topk: [1]", "topk: [4]")  # cross-field: FlashMLA supports topk 1 only
        .replace("repeats: 2", "repeats: 0")  # range
        + "warmpu: {waves: 2}\n"  # misspelled key
    )
    problems = problems_of(text)
    assert len(problems) == 5, problems
    assert "grid.batch_sizes[0]: must be >= 1 (got 0)" in problems
    assert any(p.startswith("grid.steps:") for p in problems)
    assert any(p.startswith("grid.topk: 4 is not supported") for p in problems)
    assert "repeats: must be >= 1 (got 0)" in problems
    assert "unknown key 'warmpu' (did you mean 'warmup'?)" in problems


def test_did_you_mean_in_nested_sections() -> None:
    problems = problems_of(
        BASE.replace("topk: [1]", "topk: [1], stpes: [2]").replace("input_len:", "inptu_len:")
    )
    assert "grid: unknown key 'stpes' (did you mean 'steps'?)" in problems
    assert "workload: unknown key 'inptu_len' (did you mean 'input_len'?)" in problems


@pytest.mark.parametrize(
    ("patch", "needle"),
    [
        (("repeats: 2", 'repeats: "3"'), "repeats: must be an integer"),
        (("input_len: 32", "input_len: 32.0"), "workload.input_len: must be an integer"),
        (("baseline: true", 'baseline: "yes please"'), "grid.baseline: must be a boolean"),
        (("model: sim-tiny", "model: 7"), "model: must be a string"),
        (
            ("output_len: 16}", "output_len: 16, num_prompts: '8'}"),
            "workload.num_prompts: must be an integer",
        ),
    ],
)
def test_types_are_strict(patch: tuple[str, str], needle: str) -> None:
    assert any(needle in p for p in problems_of(BASE.replace(*patch)))


@pytest.mark.parametrize(
    ("patch", "needle"),
    [
        # issue 10 §7: each of these was accepted and ran wrong.
        (("repeats: 2", "repeats: 2\nrequest_timeout_s: .inf"), "request_timeout_s: must be a finite number"),
        (("attention_backend: flashmla}", "attention_backend: flashmla, startup_timeout_s: .inf}"), "finite"),
        (("output_len: 16}", "output_len: 16, temperature: .inf}"), "temperature: must be a finite number"),
        (("output_len: 16}", "output_len: 16, temperature: .nan}"), "temperature: must be a finite number"),
        (("output_len: 16}", "output_len: 16, temperature: 1.0e+3}"), "temperature: must be <= 10"),
        (("batch_sizes: [1, 4]", "batch_sizes: [1, 1.0e+30]"), "grid.batch_sizes[1]: must be an integer"),
        (("batch_sizes: [1, 4]", "batch_sizes: [1, 1000000000000]"), "grid.batch_sizes[1]: must be <= 65536"),
        (
            ("output_len: 16}", "output_len: 16, num_prompts: 1000000000000}"),
            "num_prompts: must be an integer",
        ),
        (("steps: [1, 2, 3]", "steps: []"), "grid.steps: must not be empty"),
        (("topk: [1]", "topk: []"), "grid.topk: must not be empty"),
        (
            ("baseline: true}", "baseline: true, draft_tokens: []}"),
            "grid.draft_tokens: must be 'auto' or a non-empty",
        ),
        (("workload: {input_len: 32, output_len: 16}", "workload: []"), "workload: must not be empty"),
        (("model: sim-tiny", "model: ''"), "model: must not be empty"),
        (("model: sim-tiny", "model: '   '"), "model: must not be empty"),
        (("model: sim-tiny", 'model: "a\\nb"'), "model: contains a newline"),
        (("model: sim-tiny", "model: --help"), "model: must not start with '-'"),
        (("model: sim-tiny", 'model: sim-tiny\ndraft_model: "x\\u0007"'), "draft_model: contains a newline"),
        (
            ("attention_backend: flashmla}", "attention_backend: flashmla, env: {SGLANG_LOG_MS: null}}"),
            "null is not a value",
        ),
        (("steps: [1, 2, 3]", "steps: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16]"), None),
        (
            ("attention_backend: flashmla}", "attention_backend: flashmla, args: {context-length: .inf}}"),
            "finite",
        ),
    ],
)
def test_bounds_and_empty_lists(patch: tuple[str, str], needle: str | None) -> None:
    text = BASE.replace(*patch)
    assert text != BASE
    if needle is None:  # within bounds: accepted
        parse_sweep(text)
        return
    problems = problems_of(text)
    assert any(needle in p for p in problems), problems


def test_a_sweep_too_large_to_run_is_refused() -> None:
    sizes = ", ".join(str(i) for i in range(1, 1001))
    text = BASE.replace("batch_sizes: [1, 4]", f"batch_sizes: [{sizes}]").replace(
        "workload: {input_len: 32, output_len: 16}", "workload: [" + ", ".join(["{input_len: 8}"] * 20) + "]"
    )
    problems = problems_of(text)
    assert any(f"at most 1,000 and {MAX_POINTS:,}" in p for p in problems), problems


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        (BASE + "repeats: 3\n", "duplicate key 'repeats' (line 6 and line 7)"),
        (BASE + "extra: " + "[" * 5000 + "]" * 5000 + "\n", "'[' and '{'"),
        (BASE + "extra:" + "".join(f"\n{'  ' * i}k:" for i in range(1, 80)) + " 1\n", "nested more than 50"),
        (BASE.replace("repeats: 2", "repeats: " + "9" * 5000), "integer with 5000 digits"),
        (BASE.replace("name: t", "name: 2026-13-45"), "not valid YAML"),
        (BASE + "x: !!python/object/apply:os.system ['id']\n", "not valid YAML"),
        # Found by the fuzz (seed 113): a pre-validation default crashed on a list of lists.
        (
            BASE.replace("repeats: 2\n", "").replace("spec_modes: [v1, v2]", "spec_modes: [[null]]"),
            "spec_modes",
        ),
        ("- 1\n- 2\n", "top level must be a mapping"),
    ],
)
def test_yaml_traps_give_one_clean_error(text: str, needle: str) -> None:
    problems = problems_of(text)
    assert any(needle in p for p in problems), problems


def test_a_514_byte_alias_bomb_fails_fast_with_little_memory() -> None:
    text = "name: t\nmodel: m\ngrid: {batch_sizes: [1]}\n" + ALIAS_BOMB
    assert len(text.encode()) < 600
    tracemalloc.start()
    t0 = time.perf_counter()
    problems = problems_of(text)
    elapsed = time.perf_counter() - t0
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert any("expands to more than" in p for p in problems), problems
    assert peak < 50 * 2**20, peak  # the unbounded version reached 3 GB
    assert elapsed < 10


def test_non_utf8_and_missing_files(tmp_path: Path) -> None:
    bad = tmp_path / "latin1.yaml"
    bad.write_bytes(BASE.replace("sim-tiny", "mod\xe8le").encode("latin-1"))
    with pytest.raises(SweepError, match=r"not UTF-8 text \(byte 0xe8"):
        load_sweep(bad)
    with pytest.raises(SweepError, match="file not found"):
        load_sweep(tmp_path / "nope.yaml")
    with pytest.raises(SweepError, match="not a regular file"):
        load_sweep(tmp_path)  # a directory is there, and is no sweep file


def test_mutated_sweeps_never_raise_anything_but_sweep_error(tmp_path: Path) -> None:
    n = 300
    outcomes = {"ok": 0, "refused": 0}
    path = tmp_path / "s.yaml"
    for label, raw in mutated_sweeps(n=n, seed=1):
        path.write_bytes(raw)
        try:
            spec = load_sweep(path)
        except SweepError as e:
            assert e.problems and all(isinstance(p, str) and p for p in e.problems), label
            outcomes["refused"] += 1
            continue
        except Exception as e:  # the point of the test
            pytest.fail(f"{label}: {type(e).__name__}: {e}")
        assert isinstance(spec, SweepSpec)
        groups = expand(spec)  # what is accepted can also be planned, within bounds
        assert sum(len(g.points) for g in groups) <= MAX_POINTS
        assert all(math.isfinite(w.temperature) for w in spec.workloads)
        outcomes["ok"] += 1
    assert outcomes["refused"] + outcomes["ok"] == n
    assert outcomes["refused"] > n // 2, outcomes  # the mutations do break things


@pytest.mark.parametrize(
    "raw",
    [
        b"name: t\nmodel: \xff\xfe\n",
        ("name: t\nrepeats: " + "9" * 5000 + "\n").encode(),
        ("x: " + "[" * 3000).encode(),
        ("name: t\nmodel: m\ngrid: {batch_sizes: [1]}\n" + ALIAS_BOMB).encode(),
        b"name: '[bold]x[/]'\nmodel: m\ngrid: {batch_sizes: [1]}\n",  # rich markup in the message
    ],
)
def test_cli_reports_bad_sweeps_with_exit_2_and_no_traceback(tmp_path: Path, raw: bytes) -> None:
    path = tmp_path / "bad.yaml"
    path.write_bytes(raw)
    for argv in (
        ["run", str(path), "--dry-run"],
        ["submit", str(path), "--db", f"sqlite:///{tmp_path}/q.db"],
    ):
        result = CliRunner().invoke(app, argv)
        assert result.exit_code == 2, (argv, result.output, result.exception)
        assert "Traceback" not in result.output
        assert "invalid sweep" in result.output


@pytest.mark.parametrize(
    ("profile", "needle"),
    [
        ("{at: []}", "profile.at: must not be empty"),
        ("{at: [0]}", "profile.at[0]: must be >= 1"),
        ("{distortion_threshold: .inf}", "profile.distortion_threshold: must be a finite number"),
        ("{steps: '12'}", "profile.steps: must be an integer"),
        ("{stesp: 12}", "did you mean 'steps'?"),
    ],
)
def test_profile_block_is_bounded(profile: str, needle: str) -> None:
    problems = problems_of(BASE + f"profile: {profile}\n")
    assert any(needle in p for p in problems), problems


@pytest.mark.parametrize(
    ("patch", "needle"),
    [
        (("topk: [1]", "topk: [1], accept_lengths: [0.5, 2.0]"), "grid.accept_lengths[0]: must be >= 1"),
        (
            ("topk: [1]", "topk: [1], accept_lengths: [.inf]"),
            "grid.accept_lengths[0]: must be a finite number",
        ),
        (("topk: [1]", "topk: [1], accept_lengths: ['2']"), "grid.accept_lengths[0]: must be a number"),
        (
            ("repeats: 2", "repeats: 2\nmeasure: {min_window_s: .inf}"),
            "measure.min_window_s: must be a finite",
        ),
        (("repeats: 2", "repeats: 2\nmeasure: {accept_length_tolerance: 1.0e+9}"), "must be <= 64"),
        (("repeats: 2", "repeats: 2\nmeasure: {pairde: true}"), "did you mean 'paired'?"),
        (("backend: sim,", "backend: sim, load_format: 'x',"), "server.load_format"),
    ],
)
def test_measurement_fields_are_bounded(patch: tuple[str, str], needle: str) -> None:
    text = BASE.replace(*patch)
    assert text != BASE
    problems = problems_of(text)
    assert any(needle in p for p in problems), problems


EXTERNAL = """\
name: ext
model: sim-tiny
server: {backend: external, base_url: 'URL'}
grid: {batch_sizes: [1], spec_modes: [], baseline: true}
"""


@pytest.mark.parametrize(
    "url",
    [
        "http://admin:pw-s3cret@gpu-box:30000",
        "http://admin:pw-s3cret@gpu-box:30000/path",  # also not host[:port]: still not echoed
        "https://pw-s3cret@gpu-box",
        "http://admin:pw-s3cret@gpu-box:30000\t",  # a field error (a tab) echoes its input: not this one
    ],
)
def test_a_password_in_an_external_base_url_is_refused_and_never_echoed(tmp_path: Path, url: str) -> None:
    """Issue 35: `http://admin:pw@host` was accepted, echoed on stdout and stored in the sweep YAML, errors and
    point reasons."""
    text = EXTERNAL.replace("URL", url)
    with pytest.raises(SweepError) as e:
        parse_sweep(text)
    assert "pw-s3cret" not in str(e.value) and "not shown" in str(e.value), str(e.value)
    path = tmp_path / "ext.yaml"
    path.write_text(text)
    result = CliRunner().invoke(app, ["run", str(path), "--dry-run", "--db", f"sqlite:///{tmp_path}/x.db"])
    assert result.exit_code == 2 and "pw-s3cret" not in result.output and "Traceback" not in result.output
