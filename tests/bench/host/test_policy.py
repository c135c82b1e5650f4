"""A worker's host policy (bench/host/policy.py): interpreters by name, files under allowed directories (the
refusal the same whether the file exists or not), external servers by HOST:PORT. Real files, symlinks and
directories; the author's policy keeps a sweep as written."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bench.host.policy import (
    HostPolicy,
    PolicyError,
    external_address,
    interpreter_name_problem,
    is_model_id,
    parse_host_port,
)
from bench.sweep import parse_sweep


@pytest.fixture
def tree(tmp_path: Path) -> dict[str, Path]:
    models, data, outside = tmp_path / "models", tmp_path / "data", tmp_path / "outside"
    for d in (models / "v3", data, outside):
        d.mkdir(parents=True)
    (data / "ok.jsonl").write_text('{"input_ids": [5, 6]}\n')
    secret = outside / "secret.jsonl"
    secret.write_text("TOP SECRET\n" * 3)
    secret.chmod(0o600)
    (data / "escape.jsonl").symlink_to(secret)  # inside by name, outside by target
    (models / "escape").symlink_to(outside)
    python = tmp_path / "bin" / "python3"
    python.parent.mkdir()
    python.write_text("#!/bin/sh\nexit 0\n")
    python.chmod(0o755)
    return {"models": models, "data": data, "outside": outside, "secret": secret, "python": python}


def worker(tree: dict[str, Path], **kw: object) -> HostPolicy:
    return HostPolicy.worker(
        pythons={"sg": str(tree["python"])},
        models_dirs=[str(tree["models"])],
        data_dirs=[str(tree["data"])],
        **kw,  # type: ignore[arg-type]
    )


def refusal(fn: object, *args: object) -> str:
    with pytest.raises(PolicyError) as e:
        fn(*args)  # type: ignore[operator]
    return str(e.value)


def test_files_under_the_allowed_directories_pass(tree: dict[str, Path]) -> None:
    p = worker(tree)
    p.check_data_file(str(tree["data"] / "ok.jsonl"), "workload.path")
    p.check_model(str(tree["models"] / "v3"), "model")
    p.check_model(str(tree["models"] / "v3" / ".." / "v3"), "model")  # `..` that stays inside is fine


@pytest.mark.parametrize(
    "name",
    [
        "outside/secret.jsonl",  # plainly outside
        "data/../outside/secret.jsonl",  # `..` out of an allowed directory
        "data/escape.jsonl",  # a symlink inside that points outside
        "data/ok.jsonl/../../outside/secret.jsonl",
    ],
)
def test_a_workload_path_outside_is_refused_the_same_whether_it_exists_or_not(
    tree: dict[str, Path], name: str
) -> None:
    p = worker(tree)
    path = str(tree["data"].parent / name)
    exists = refusal(p.check_data_file, path, "workload.path")
    tree["secret"].unlink()  # the same path text, now naming nothing
    missing = refusal(p.check_data_file, path, "workload.path")
    assert exists == missing  # byte for byte: the message cannot tell whether the file is there
    assert "--data-dir" in exists
    assert "TOP SECRET" not in exists and "lines" not in exists


def test_relative_paths_are_refused_for_files_and_ids_pass_for_models(tree: dict[str, Path]) -> None:
    p = worker(tree)
    assert "--data-dir" in refusal(p.check_data_file, "data/ok.jsonl", "workload.path")
    for model_id in ("deepseek-ai/DeepSeek-V3", "sim-tiny", "org/name.v2"):
        assert is_model_id(model_id)
        p.check_model(model_id, "model")
    for not_id in ("/etc", "../x", "./x", "~/x", "a/b/c", "org/../x", "org--x/y"):
        assert not is_model_id(not_id)
        assert "--models-dir" in refusal(p.check_model, not_id, "model")
    assert "--models-dir" in refusal(p.check_model, str(tree["models"] / "escape"), "model")


@pytest.mark.parametrize("value", [["/outside/dir"], ("/outside/dir",), 7, {"path": "/outside"}, None])
def test_a_path_of_another_yaml_type_is_refused_not_skipped(tree: dict[str, Path], value: object) -> None:
    """Issue 35 §2: `tokenizer-path: [/outside/dir]` once passed because the checks looked at strings only."""
    for policy in (worker(tree), HostPolicy.author()):
        assert "one path or model id as a string" in refusal(
            policy.check_model, value, "server.args.tokenizer-path"
        )


def test_interpreters_are_names_the_operator_gave(tree: dict[str, Path]) -> None:
    p = worker(tree)
    assert p.interpreter("sg") == str(tree["python"])
    assert p.interpreter(None) is None  # the worker's own interpreter
    assert "is a path" in refusal(p.interpreter, str(tree["python"]))
    assert "is a path" in refusal(p.interpreter, "./python3")
    assert "not an interpreter this worker offers (it offers: sg" in refusal(p.interpreter, "python3")
    assert interpreter_name_problem("sglang-0.5.12") is None
    assert p.offered() == {"python": ["sg"], "external": []}


def test_external_servers_by_host_and_port(tree: dict[str, Path]) -> None:
    p = worker(tree, external=["127.0.0.1:18777", "GPU-Box.lan:30000"])
    p.check_external("http://127.0.0.1:18777")
    p.check_external("http://gpu-box.lan:30000/")
    assert "--allow-external" in refusal(p.check_external, "http://127.0.0.1:18778")
    assert "--allow-external" in refusal(p.check_external, "http://127.0.0.1")  # port 80
    assert external_address("https://h") == "h:443" and external_address("ftp://h:1") is None
    assert parse_host_port("[::1]:30000") == "[::1]:30000"
    with pytest.raises(ValueError):
        parse_host_port("127.0.0.1")


def test_the_operators_own_settings_are_checked(tree: dict[str, Path]) -> None:
    with pytest.raises(PolicyError) as e:
        HostPolicy.worker(
            pythons={"a/b": str(tree["python"]), "x": "/no/such/python", "y": "python3"},
            models_dirs=["/no/such/dir"],
            external=["nohostport"],
        )
    assert len(e.value.problems) == 5


def test_a_whole_sweep_lists_every_problem_and_the_author_keeps_paths(tree: dict[str, Path]) -> None:
    sweep = parse_sweep(
        f"""
name: t
model: {tree["outside"]}
draft_model: /etc
server: {{backend: sglang, python: {tree["python"]}, args: {{tokenizer-path: /root}}}}
grid: {{batch_sizes: [1]}}
workload: [{{dataset: jsonl, path: {tree["secret"]}}}, {{dataset: jsonl, path: {tree["data"] / "ok.jsonl"}}}]
"""
    )
    problems = worker(tree).problems(sweep)
    assert [p.split(":")[0] for p in problems] == [
        "server.python",
        "model",
        "draft_model",
        "server.args.tokenizer-path",
        "workload[0].path",
    ]
    assert HostPolicy.author().problems(sweep) == []
    assert HostPolicy.author().interpreter(str(tree["python"])) == str(tree["python"])


def test_a_worker_without_directories_allows_no_file(tmp_path: Path) -> None:
    p = HostPolicy.worker()
    assert "none: its operator sets --data-dir DIR" in refusal(
        p.check_data_file, str(tmp_path), "workload.path"
    )
    assert p.confined and os.path.isabs(str(tmp_path))
