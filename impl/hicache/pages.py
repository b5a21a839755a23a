"""Page identities: each page is named by a chained content hash of its token path.

A page of ``page_size`` tokens is identified by every token from the root to its end (that
is what HiCache's chained page hash is), so two requests that share a prefix share those
pages. The registry remembers each hash's token path, depth and parent page.
"""

from __future__ import annotations

import hashlib

from tiercheck.errors import UserError


def chain_hash(parent: str, page_tokens) -> str:
    h = hashlib.sha256()
    h.update(parent.encode())
    h.update(b"|")
    h.update(",".join(str(int(t)) for t in page_tokens).encode())
    return h.hexdigest()[:32]


class PageRegistry:
    def __init__(self, page_size: int) -> None:
        self.page_size = page_size
        self.path: dict[str, tuple] = {}  # hash -> token path from the root to the page's end
        self.depth: dict[str, int] = {}  # hash -> pages from the root (1 for a root page)
        self.parent: dict[str, str | None] = {}  # hash -> previous page, None at the root
        self._by_path: dict[tuple, str] = {}

    def hashes(self, tokens) -> list[str]:
        """The page hashes of a token sequence (its length must be whole pages)."""
        tokens = tuple(int(t) for t in tokens)
        ps = self.page_size
        if len(tokens) % ps:
            raise UserError(
                f"a request of {len(tokens)} tokens is not a whole number of pages (page_size={ps})"
            )
        out: list[str] = []
        prev = ""
        for i in range(ps, len(tokens) + 1, ps):
            prefix = tokens[:i]
            h = self._by_path.get(prefix)
            if h is None:
                h = chain_hash(prev, prefix[-ps:])
                self._by_path[prefix] = h
                self.path[h] = prefix
                self.depth[h] = i // ps
                self.parent[h] = prev or None
            out.append(h)
            prev = h
        return out

    def whole_pages(self, tokens) -> tuple:
        """The page-aligned prefix of a token sequence: what SGLang caches of a request
        (cache_finished_req frees the partial last page)."""
        tokens = tuple(int(t) for t in tokens)
        return tokens[: len(tokens) // self.page_size * self.page_size]

    def of_path(self, path) -> str:
        """The hash of the page that ends at token path ``path``."""
        hs = self.hashes(path)
        if not hs:
            raise UserError("an empty token path names no page")
        return hs[-1]
