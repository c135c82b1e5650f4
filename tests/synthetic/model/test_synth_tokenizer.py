"""The synthetic checkpoint's tokenizer: loads offline with HF transformers and round-trips every id."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from runners.commands import synth_model
from synthetic.model import tokenizer as synth_tok

tokenizers = pytest.importorskip("tokenizers")


def _auto_tokenizer(path: Path) -> Any:
    """HF transformers' AutoTokenizer from `path`: transformers is imported here, by the tests that load one,
    not when every xdist worker collects this module (~0.7 s of CPU each)."""
    transformers = pytest.importorskip("transformers")
    return transformers.AutoTokenizer.from_pretrained(str(path))


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch) -> None:
    # A load that reached for the hub would fail here instead of passing on a connected machine.
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")


def test_autotokenizer_loads_offline_and_round_trips(tmp_path: Path) -> None:
    vocab = 5000
    synth_tok.write_tokenizer(tmp_path, vocab)
    tok = _auto_tokenizer(tmp_path)
    assert tok.vocab_size == vocab and len(tok) == vocab
    assert (tok.bos_token_id, tok.eos_token_id, tok.unk_token_id) == (0, 1, 2)
    # bench_serving's text mode shortens prompts by this many tokens; 0 means it reports what is prefilled.
    assert tok.num_special_tokens_to_add() == 0
    rng = random.Random(7)
    ids = [0, 1, 2, vocab - 1, *(rng.randrange(vocab) for _ in range(500))]
    text = tok.decode(ids)
    assert tok.encode(text) == ids
    assert tok(text)["input_ids"] == ids
    # The stand-in loads tokenizer.json with the tokenizers library alone: same ids.
    raw = tokenizers.Tokenizer.from_file(str(tmp_path / "tokenizer.json"))
    assert raw.encode(text).ids == ids
    assert raw.get_vocab_size() == vocab
    chat = tok.apply_chat_template(
        [{"role": "user", "content": "t5 t6"}], tokenize=False, add_generation_prompt=True
    )
    assert "t5 t6" in chat


def test_too_small_vocab_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="vocab_size"):
        synth_tok.write_tokenizer(tmp_path, 3)


def _cli_app() -> typer.Typer:
    app = typer.Typer()

    @app.callback()
    def _root() -> None:  # keeps "synth-model" a subcommand
        pass

    synth_model.register(app)
    return app


def test_synth_model_writes_tokenizer_sized_from_config(tmp_path: Path) -> None:
    runner = CliRunner()
    d = tmp_path / "with"
    args = ["synth-model", str(d), "--hidden", "128", "--heads", "2", "--vocab", "96"]
    result = runner.invoke(_cli_app(), args)
    assert result.exit_code == 0, result.output
    assert "tokenizer.json" in result.output
    config = json.loads((d / "config.json").read_text())
    tok = _auto_tokenizer(d)
    assert tok.vocab_size == config["vocab_size"] == 96
    assert tok.model_max_length == config["max_position_embeddings"]

    bare = tmp_path / "without"
    result = runner.invoke(
        _cli_app(), ["synth-model", str(bare), "--hidden", "128", "--heads", "2", "--no-tokenizer"]
    )
    assert result.exit_code == 0, result.output
    assert not (bare / "tokenizer.json").exists() and not (bare / "tokenizer_config.json").exists()


def test_preset_checkpoint_gets_a_tokenizer_of_its_vocab(tmp_path: Path) -> None:
    d = tmp_path / "v3"
    result = CliRunner().invoke(
        _cli_app(), ["synth-model", str(d), "--preset", "deepseek-v3-slice", "--layers", "5"]
    )
    assert result.exit_code == 0, result.output
    config = json.loads((d / "config.json").read_text())
    tok = _auto_tokenizer(d)
    assert tok.vocab_size == config["vocab_size"] == 129280
    ids = [0, 5, 129279, 77777]
    assert tok.encode(tok.decode(ids)) == ids


def test_tp8_shard_gets_a_tokenizer_of_its_16160_ids(tmp_path: Path) -> None:
    d = tmp_path / "shard"
    result = CliRunner().invoke(_cli_app(), ["synth-model", str(d), "--preset", "deepseek-v3-tp8-shard"])
    assert result.exit_code == 0, result.output
    tok = _auto_tokenizer(d)
    assert tok.vocab_size == json.loads((d / "config.json").read_text())["vocab_size"] == 16160
    ids = [0, 1, 2, 16159, 8000]
    assert tok.encode(tok.decode(ids)) == ids
    assert tok.decode([16159]) == "t16159"
