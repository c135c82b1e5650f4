"""The stand-in tokenizes text prompts with the server's tokenizer when it has one, like SGLang."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from synthetic.model.tokenizer import write_tokenizer
from tests.fixtures.sim import SimFactory, generate, get_json

tokenizers = pytest.importorskip("tokenizers")

INSTANT = {"SPECBENCH_SIM_INSTANT": "1"}
VOCAB = 2048


@pytest.fixture(scope="module")
def tok_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("tok")
    write_tokenizer(d, VOCAB)
    return d


def _prompt_tokens(handle: object, text: str) -> int:
    out = generate(handle, {"text": text, "sampling_params": {"max_new_tokens": 2, "ignore_eos": True}})  # type: ignore[arg-type]
    return int(out["meta_info"]["prompt_tokens"])


def test_text_is_counted_with_the_tokenizer_path(sim_server: SimFactory, tok_dir: Path) -> None:
    handle = sim_server.start("--tokenizer-path", str(tok_dir), env=INSTANT)
    rng = random.Random(3)
    ids = [rng.randrange(VOCAB) for _ in range(256)]
    text = tokenizers.Tokenizer.from_file(str(tok_dir / "tokenizer.json")).decode(
        ids, skip_special_tokens=False
    )
    # 256 ids decoded to text come back as 256 prompt tokens, not the hash scheme's ~4 chars per token.
    assert _prompt_tokens(handle, text) == 256
    assert _prompt_tokens(handle, "t5 t6 <s> t7") == 4
    assert get_json(handle, "/server_info")["specbench_sim"]["tokenizer"] == str(tok_dir / "tokenizer.json")


def test_model_path_with_a_tokenizer_is_used(sim_server: SimFactory, tok_dir: Path) -> None:
    handle = sim_server.start(env=INSTANT, model_path=str(tok_dir))
    assert _prompt_tokens(handle, " ".join(f"t{i}" for i in range(100, 400))) == 300


def test_without_a_tokenizer_the_hash_scheme_stays(sim_server: SimFactory) -> None:
    handle = sim_server.start(env=INSTANT)
    text = "abcd" * 64
    assert _prompt_tokens(handle, text) == 64  # four bytes per token
    assert get_json(handle, "/server_info")["specbench_sim"]["tokenizer"].startswith("hash")


def test_an_explicit_tokenizer_path_that_does_not_load_fails_start_up(
    sim_server: SimFactory, tmp_path: Path
) -> None:
    code, log = sim_server.run_to_exit("--tokenizer-path", str(tmp_path / "missing"), env=INSTANT)
    assert code == 1
    assert "Can't load tokenizer" in log
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "tokenizer.json").write_text("{not json")
    code, log = sim_server.run_to_exit("--tokenizer-path", str(broken), env=INSTANT)
    assert code == 1 and "Can't load tokenizer" in log
