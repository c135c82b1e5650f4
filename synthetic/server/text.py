"""Text prompts into token ids: `--tokenizer-path`'s `tokenizer.json` as SGLang encodes, else the toy hash
of `synthetic.server.tokens`; an explicit path that does not load fails start-up, as on SGLang.
"""

from collections.abc import Callable
from pathlib import Path

from synthetic.server.tokens import tokenize as hash_tokenize

TOKENIZER_FILE = "tokenizer.json"

Encode = Callable[[str], list[int]]


class TokenizerLoadError(RuntimeError):
    """`--tokenizer-path` names something the stand-in cannot load as an HF tokenizer."""


def load_encoder(tokenizer_path: str, *, explicit: bool, vocab_size: int) -> tuple[Encode, str | None]:
    """The prompt encoder and the tokenizer.json it came from (the path or one in it; None: the hash)."""
    path = Path(tokenizer_path)
    found = path if path.is_file() and path.name.endswith(".json") else path / TOKENIZER_FILE
    if not found.is_file():
        if explicit:
            raise TokenizerLoadError(
                f"OSError: Can't load tokenizer for '{tokenizer_path}': no {TOKENIZER_FILE} there "
                "(the specbench stand-in loads HF fast tokenizers only, offline)"
            )
        return (lambda text: hash_tokenize(text, vocab_size)), None
    from tokenizers import Tokenizer

    try:
        tok = Tokenizer.from_file(str(found))
    except Exception as exc:  # the library raises a bare Exception on a malformed file
        raise TokenizerLoadError(f"OSError: Can't load tokenizer from '{found}': {exc}") from exc

    def encode(text: str) -> list[int]:
        return tok.encode(text, add_special_tokens=True).ids

    return encode, str(found)
