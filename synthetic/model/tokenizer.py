"""A word-level tokenizer for synthetic checkpoints, so text-mode clients work with no hub access: exactly
`vocab_size` entries (0 `<s>`, 1 `</s>`, 2 `<unk>`, else `t<i>`), `encode(decode(ids)) == ids`, no BOS added.
"""

import json
import os
from pathlib import Path

from synthetic.model.build import write_atomic
from synthetic.model.layout import BOS_TOKEN_ID, EOS_TOKEN_ID

TOKENIZER_FILE = "tokenizer.json"
TOKENIZER_CONFIG_FILE = "tokenizer_config.json"

BOS_TOKEN = "<s>"
EOS_TOKEN = "</s>"
UNK_TOKEN = "<unk>"
UNK_TOKEN_ID = 2
SPECIAL_TOKENS = {BOS_TOKEN: BOS_TOKEN_ID, EOS_TOKEN: EOS_TOKEN_ID, UNK_TOKEN: UNK_TOKEN_ID}
MIN_VOCAB = len(SPECIAL_TOKENS) + 1

# Roles become <unk> in a word-level vocabulary, which is harmless.
CHAT_TEMPLATE = (
    "{% for message in messages %}{{ message['role'] }}: {{ message['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}assistant:{% endif %}"
)


def vocabulary(vocab_size: int) -> dict[str, int]:
    if vocab_size < MIN_VOCAB:
        raise ValueError(f"a synthetic tokenizer needs vocab_size >= {MIN_VOCAB}, got {vocab_size}")
    vocab = {f"t{i}": i for i in range(vocab_size) if i not in SPECIAL_TOKENS.values()}
    vocab.update(SPECIAL_TOKENS)
    return vocab


def write_tokenizer(
    out_dir: str | os.PathLike[str], vocab_size: int, *, model_max_length: int = 1 << 20
) -> list[Path]:
    """Write tokenizer.json and tokenizer_config.json into `out_dir`; return their paths."""
    from tokenizers import AddedToken, Tokenizer
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import WhitespaceSplit

    tok = Tokenizer(WordLevel(vocabulary(vocab_size), unk_token=UNK_TOKEN))
    tok.pre_tokenizer = WhitespaceSplit()  # type: ignore[assignment]  # tokenizers' stubs type it narrowly
    # Special tokens are matched before splitting, so "<s>" in a decoded prompt re-encodes to id 0.
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIAL_TOKENS])
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / TOKENIZER_FILE, out / TOKENIZER_CONFIG_FILE]
    write_atomic(paths[0], tok.to_str(pretty=False).encode())
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": BOS_TOKEN,
        "eos_token": EOS_TOKEN,
        "unk_token": UNK_TOKEN,
        "pad_token": EOS_TOKEN,
        "add_bos_token": False,
        "add_eos_token": False,
        "clean_up_tokenization_spaces": False,
        "model_max_length": model_max_length,
        "chat_template": CHAT_TEMPLATE,
    }
    write_atomic(paths[1], (json.dumps(config, indent=2) + "\n").encode())
    return paths


def write_for_checkpoint(model_dir: str | os.PathLike[str]) -> list[Path]:
    """Write the tokenizer next to a checkpoint, sized from its config.json."""
    config = json.loads((Path(model_dir) / "config.json").read_text())
    return write_tokenizer(
        model_dir,
        int(config["vocab_size"]),
        model_max_length=int(config.get("max_position_embeddings", 1 << 20)),
    )


def main(argv: list[str] | None = None) -> int:
    """`python -m synthetic.model.tokenizer MODEL_DIR`: add the tokenizer to a synthetic checkpoint."""
    import sys

    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or not (Path(args[0]) / "config.json").is_file():
        print("usage: python -m synthetic.model.tokenizer MODEL_DIR (holding config.json)", file=sys.stderr)
        return 2
    for p in write_for_checkpoint(args[0]):
        print(p)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
