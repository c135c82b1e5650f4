"""Deterministic stand-in tokens: a toy tokenizer for text prompts and the output ids, a function of the sim
seed and the prompt, built lazily by `TokenTape` with their JSON and text so a cumulative event is two slices.
"""

import hashlib
import math
import zlib
from array import array
from collections.abc import Sequence
from itertools import accumulate, repeat
from operator import add

_MASK = (1 << 64) - 1
_FIRST_ORDINARY_ID = 1000
SIMULATED_ACC_TOKEN = 100  # SGLANG_SIMULATE_ACC_LEN overwrites committed tokens with this id


def tokenize(text: str, vocab_size: int) -> list[int]:
    """About four characters per token, like a BPE vocabulary on English text."""
    span = vocab_size - _FIRST_ORDINARY_ID
    data = text.encode()
    ids = [zlib.crc32(data[i : i + 4]) % span + _FIRST_ORDINARY_ID for i in range(0, len(data), 4)]
    return ids or [_FIRST_ORDINARY_ID]


def prompt_key(ids: Sequence[int], seed: int) -> int:
    return (hash(tuple(ids)) * 0x9E3779B97F4A7C15 + seed * 0xBF58476D1CE4E5B9 + 1) & _MASK


def natural_length(key: int, mean_tokens: int, min_tokens: int) -> int:
    """Where an EOS lands when the request does not ignore it: geometric with the given mean."""
    u = ((key * 0xD6E8FEB86659FD93) & _MASK) / float(1 << 64)
    q = 1.0 - 1.0 / max(2, mean_tokens)
    length = 1 + int(math.log(1.0 - u) / math.log(q))
    return max(length, min_tokens, 1)


# Blocks of positions, each from its own hash, as 16-bit draws past the special ids: [1000, 66536).
_BLOCK = 64


class _DecimalCache(dict[int, str]):
    """str(id) for every id seen so far: a lookup is cheaper than formatting each token anew, and a server start
    does not format the 66k ids it may never emit."""

    def __missing__(self, tok: int) -> str:
        text = self[tok] = str(tok)
        return text


_DECIMAL = _DecimalCache()


class TokenTape:
    """Output ids of one request: `ids_json` "12,34,56," and `text` " t12 t34 t56", with lengths per token."""

    __slots__ = (
        "_diverge_at",
        "_eos_at",
        "_key",
        "_simulated",
        "eos_id",
        "ids",
        "ids_end",
        "ids_json",
        "text",
        "text_end",
        "with_text",
    )

    def __init__(
        self,
        key: int,
        *,
        with_text: bool,
        simulated_acc: bool,
        eos_id: int,
        eos_at: int | None,
        diverge_at: int | None = None,
    ) -> None:
        self._key = key
        # synthetic.server.wrong's v2_verify: from this position on, the ids come from another stream.
        self._diverge_at = diverge_at
        self._simulated = simulated_acc
        self.eos_id = eos_id
        self._eos_at = eos_at
        self.with_text = with_text
        self.ids: list[int] = []
        self.ids_json = b""
        self.ids_end: list[int] = [0]
        self.text = b""
        self.text_end: list[int] = [0]

    def extend_to(self, n: int) -> None:
        while len(self.ids) < n:
            self._add_block()

    def _add_block(self) -> None:
        have = len(self.ids)
        raw = hashlib.shake_128(b"%d:%d" % (self._key, have // _BLOCK)).digest(2 * _BLOCK)
        new = list(map(add, array("H", raw), repeat(_FIRST_ORDINARY_ID)))
        if self._diverge_at is not None and self._diverge_at < have + _BLOCK:
            self._diverge(new, have)
        if self._simulated:
            first = new[0]
            new = [SIMULATED_ACC_TOKEN] * _BLOCK
            if have == 0:
                new[0] = first
        if self._eos_at is not None and have <= self._eos_at < have + _BLOCK:
            new[self._eos_at - have] = self.eos_id
        self.ids += new
        strs = list(map(_DECIMAL.__getitem__, new))
        ends = accumulate(map(add, map(len, strs), repeat(1)), initial=len(self.ids_json))
        next(ends)  # `initial` repeats the offset we already have
        self.ids_end += ends
        self.ids_json += (",".join(strs) + ",").encode()
        if self.with_text:
            ends = accumulate(map(add, map(len, strs), repeat(2)), initial=len(self.text))
            next(ends)
            self.text_end += ends
            self.text += (" t" + " t".join(strs)).encode()

    def _diverge(self, new: list[int], have: int) -> None:
        alt = hashlib.shake_128(b"wrong:%d:%d" % (self._key, have // _BLOCK)).digest(2 * _BLOCK)
        start = max(0, self._diverge_at - have) if self._diverge_at is not None else _BLOCK
        for i, tok in enumerate(array("H", alt)):
            if i < start:
                continue
            wrong = tok + _FIRST_ORDINARY_ID
            if i == start and wrong == new[i]:  # the first wrong token must differ (odds 1/65536)
                wrong = _FIRST_ORDINARY_ID + (tok + 1) % 65536
            new[i] = wrong
