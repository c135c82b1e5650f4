from __future__ import annotations

from pathlib import Path

import pytest

from bench.sweep import WorkloadSpec
from bench.workload import FIRST_RANDOM_ID, Prompt, WorkloadError, build_prompts


def _random(**kw: object) -> WorkloadSpec:
    return WorkloadSpec.model_validate({"dataset": "random", **kw})


def test_random_prompts_have_exact_lengths_and_ids_in_range() -> None:
    prompts = build_prompts(_random(input_len=37, output_len=11, seed=3), 50, vocab_size=1000)
    assert len(prompts) == 50
    for p in prompts:
        assert p.text is None and p.input_ids is not None
        assert len(p.input_ids) == p.prompt_len == 37
        assert p.output_len == 11
        assert all(FIRST_RANDOM_ID <= t < 1000 for t in p.input_ids)
        assert all(type(t) is int for t in p.input_ids)  # plain ints: JSON-serializable as is


def test_random_prompts_are_deterministic_per_seed() -> None:
    a = build_prompts(_random(input_len=64, seed=7), 8)
    b = build_prompts(_random(input_len=64, seed=7), 8)
    c = build_prompts(_random(input_len=64, seed=8), 8)
    assert a == b
    assert a != c


def test_random_prompts_never_share_a_prefix() -> None:
    # Distinct first tokens: the radix cache cannot serve any prompt's prefix to another.
    prompts = build_prompts(_random(input_len=16), 500, vocab_size=600)
    firsts = [p.input_ids[0] for p in prompts if p.input_ids]
    assert len(set(firsts)) == 500


def test_random_prompts_beyond_the_vocabulary_differ_within_the_first_tokens() -> None:
    # 30 prompts over 8 usable ids: the index is spread over the first two positions.
    prompts = build_prompts(_random(input_len=4), 30, vocab_size=10)
    openings = {tuple(p.input_ids[:2]) for p in prompts if p.input_ids}
    assert len(openings) == 30


def test_random_prompts_that_cannot_differ_are_refused() -> None:
    with pytest.raises(WorkloadError, match="cannot all differ"):
        build_prompts(_random(input_len=1), 30, vocab_size=10)


def test_prompt_needs_exactly_one_input() -> None:
    with pytest.raises(ValueError):
        Prompt(prompt_len=1, output_len=1)
    with pytest.raises(ValueError):
        Prompt(prompt_len=1, output_len=1, input_ids=[3], text="x")


def _jsonl(tmp_path: Path, text: str) -> WorkloadSpec:
    path = tmp_path / "data.jsonl"
    path.write_text(text)
    return WorkloadSpec.model_validate({"dataset": "jsonl", "path": str(path), "output_len": 32})


def test_jsonl_ids_and_text_with_optional_lengths(tmp_path: Path) -> None:
    w = _jsonl(
        tmp_path,
        '{"input_ids": [5, 6, 7]}\n'
        "\n"
        '{"prompt": "hello world", "output_len": 8, "prompt_len": 2}\n'
        '{"prompt": "no length"}\n',
    )
    p = build_prompts(w, 3)
    assert p[0] == Prompt(prompt_len=3, output_len=32, input_ids=[5, 6, 7])
    assert p[1] == Prompt(prompt_len=2, output_len=8, text="hello world")
    assert p[2] == Prompt(prompt_len=0, output_len=32, text="no length")  # 0: unknown, server count used


def test_jsonl_cycles_when_short(tmp_path: Path) -> None:
    w = _jsonl(tmp_path, '{"input_ids": [2]}\n{"input_ids": [3]}\n')
    ids = [p.input_ids for p in build_prompts(w, 5)]
    assert ids == [[2], [3], [2], [3], [2]]


def test_jsonl_bad_lines_are_all_reported_with_line_numbers(tmp_path: Path) -> None:
    w = _jsonl(
        tmp_path,
        '{"input_ids": [2, 3]}\n'
        "{not json\n"
        '["a list"]\n'
        '{"input_ids": [2], "prompt": "both"}\n'
        '{"input_ids": [2, "x"]}\n'
        '{"input_ids": [2, 99999999]}\n'
        '{"prompt": "ok", "output_len": 0}\n'
        '{"prompt": ""}\n',
    )
    with pytest.raises(WorkloadError) as e:
        build_prompts(w, 4)
    msg = str(e.value)
    assert "7 bad line(s)" in msg
    for lineno, words in [
        (2, "not valid JSON"),
        (3, "expected an object"),
        (4, "exactly one of"),
        (5, "'x'"),
        (6, "99999999"),
        (7, "output_len"),
        (8, "non-empty string"),
    ]:
        assert f"data.jsonl:{lineno}: " in msg
        line = next(x for x in msg.splitlines() if f"data.jsonl:{lineno}: " in x)
        assert words in line, line


def test_jsonl_empty_or_missing_file(tmp_path: Path) -> None:
    with pytest.raises(WorkloadError, match="no prompts"):
        build_prompts(_jsonl(tmp_path, "\n\n"), 2)
    missing = WorkloadSpec.model_validate({"dataset": "jsonl", "path": str(tmp_path / "nope.jsonl")})
    with pytest.raises(WorkloadError, match="cannot read"):
        build_prompts(missing, 2)


def _file(path: Path | str) -> WorkloadSpec:
    return WorkloadSpec.model_validate({"dataset": "jsonl", "path": str(path)})


@pytest.mark.parametrize("path", ["/dev/zero", "/dev/null", "/proc/self/environ", "/sys/kernel/mm"])
def test_devices_and_pseudo_files_are_never_read(path: str) -> None:
    """/dev/zero was read until memory ran out; /proc files claim size 0 and are no data (issue 30 §9)."""
    if not Path(path).exists():
        pytest.skip(f"{path} is not on this host")
    with pytest.raises(WorkloadError, match="not a regular file"):
        build_prompts(_file(path), 4)


def test_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    """Nobody writes to it: reading it would wait forever. It is refused from its metadata, and even an open
    of it would not wait (O_NONBLOCK)."""
    import os
    import threading

    fifo = tmp_path / "prompts.jsonl"
    os.mkfifo(fifo)
    outcome: list[BaseException | None] = []

    def attempt() -> None:
        try:
            build_prompts(_file(fifo), 4)
            outcome.append(None)
        except BaseException as e:  # the outcome is checked below
            outcome.append(e)

    t = threading.Thread(target=attempt, daemon=True)
    t.start()
    t.join(timeout=60)  # generous for a loaded machine; a blocking read never ends at all
    assert not t.is_alive(), "reading a FIFO blocked"
    assert isinstance(outcome[0], WorkloadError) and "not a regular file" in str(outcome[0])


def test_a_directory_and_a_file_over_the_cap_are_refused(tmp_path: Path) -> None:
    from bench.workload import read_workload_file, workload_file_problem

    with pytest.raises(WorkloadError, match="not a regular file"):
        build_prompts(_file(tmp_path), 4)
    big = tmp_path / "big.jsonl"
    big.write_bytes(b'{"input_ids": [5]}\n' * 100)
    problem = workload_file_problem(big, cap=1000)
    assert problem is not None and "more than the 1,000-byte limit" in problem
    with pytest.raises(WorkloadError, match="limit"):
        read_workload_file(big, cap=1000)
    assert read_workload_file(big, cap=10_000) == big.read_bytes()
