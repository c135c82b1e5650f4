"""How many prompt tokens were cached, SGLang's one client-visible prefix-cache answer: a chained hash per
page, not a tree; whole pages only, never the full prompt; least-recently-used pages evicted past capacity.
"""

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
