"""A prefix cache that answers SGLang's one client-visible question: how many prompt tokens were cached.

Instead of a tree it keeps one chained hash per cached page (page = `page_size` tokens), so a
prompt's hit length is the number of leading pages whose chained hash is present. Like SGLang it
only matches whole pages and never the full prompt (the last token must be computed to sample
from), and it evicts least-recently-used pages once `capacity` tokens are cached.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence


class RadixCache:
    def __init__(self, *, page_size: int, capacity_tokens: int, enabled: bool) -> None:
        self.page_size = max(1, page_size)
        self.enabled = enabled
        self._capacity_pages = max(1, capacity_tokens // self.page_size)
        self._pages: OrderedDict[int, None] = OrderedDict()

    def match(self, ids: Sequence[int]) -> int:
        if not self.enabled or not self._pages:
            return 0
        pages = self._pages
        hit = 0
        for h in self._chain(ids, len(ids) - 1):
            if h not in pages:
                break
            pages.move_to_end(h)
            hit += self.page_size
        return hit

    def insert(self, ids: Sequence[int]) -> None:
        if not self.enabled:
            return
        pages = self._pages
        for h in self._chain(ids, len(ids)):
            if h in pages:
                pages.move_to_end(h)
            else:
                pages[h] = None
        while len(pages) > self._capacity_pages:
            pages.popitem(last=False)

    def reset(self) -> None:
        self._pages.clear()

    @property
    def cached_tokens(self) -> int:
        return len(self._pages) * self.page_size

    def _chain(self, ids: Sequence[int], limit: int) -> list[int]:
        size = self.page_size
        out: list[int] = []
        h = 0
        if size == 1:
            for tok in ids[:limit]:
                h = hash((h, tok))
                out.append(h)
            return out
        for start in range(0, limit - size + 1, size):
            h = hash((h, *ids[start : start + size]))
            out.append(h)
        return out
