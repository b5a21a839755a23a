"""The radix tree over pages of one rank: nodes are runs of pages on one token path.

Structure only: walk, split at a page boundary, add, remove, and the queries the protocol
needs. A node is named by its last page (its *end*); ``owner`` maps every cached page to
its node and ``by_end`` maps end pages to nodes. Which pools the slots belong to and when
they are freed is the protocol's business (impl/hicache/*_path.py).
"""

from __future__ import annotations

from .pages import PageRegistry

# Device copy: absent (value is None) / resident / loading (H->D in flight).
ABSENT, RESIDENT, LOADING = "absent", "resident", "loading"
# Host copy: absent / writing (D->H in flight, slots held) / resident.
WRITING = "writing"


class Node:
    __slots__ = (
        "pages", "parent", "children", "dev", "host", "dev_slots", "host_slots",
        "lock_ref", "host_ref", "hit_count", "lbp", "released", "last_access",
    )

    def __init__(self, pages: list[str], parent: "Node | None") -> None:
        self.pages = pages  # page hashes, top-down
        self.parent = parent
        self.children: dict[str, Node] = {}  # first page hash -> child
        self.dev = RESIDENT
        self.host = ABSENT
        self.dev_slots: list[int] | None = None
        self.host_slots: list[int] | None = None
        self.lock_ref = 0
        self.host_ref = 0  # host_ref_counter: protect_host / release_host
        self.hit_count = 0
        self.lbp = False  # load_back_pending: an H->D copy reads this node's host slots
        self.released = False  # the host mirror was released (seed 000)
        self.last_access = 0

    @property
    def start(self) -> str:
        return self.pages[0]

    @property
    def end(self) -> str:
        return self.pages[-1]

    def __len__(self) -> int:
        return len(self.pages)

    def __repr__(self) -> str:
        return f"Node(end={self.end[:8]}, pages={len(self.pages)}, dev={self.dev}, host={self.host})"


class RadixTree:
    def __init__(self, registry: PageRegistry) -> None:
        self.reg = registry
        self.root = Node([], None)
        self.owner: dict[str, Node] = {}
        self.by_end: dict[str, Node] = {}
        self.clock = 0  # logical LRU clock: replicated, no wall time
        self.on_touch = None  # called with each touched node (the rank's wall-clock order)

    # -- queries ----------------------------------------------------------------------------

    def nodes(self) -> list[Node]:
        return list(self.by_end.values())

    def node_at(self, end_hash: str) -> Node | None:
        return self.by_end.get(end_hash)

    def children(self, node: Node) -> list[Node]:
        return list(node.children.values())

    def subtree(self, node: Node) -> list[Node]:
        """``node`` and all its descendants, parents before children."""
        out, stack = [], [node]
        while stack:
            n = stack.pop()
            out.append(n)
            stack.extend(n.children.values())
        return out

    def path_to_root(self, node: Node) -> list[Node]:
        out = []
        while node is not None and node is not self.root:
            out.append(node)
            node = node.parent
        return out

    def covering(self, pages) -> list[Node]:
        """The nodes holding at least one of ``pages`` (deduplicated, in page order)."""
        out: list[Node] = []
        seen: set[int] = set()
        for h in pages:
            n = self.owner.get(h)
            if n is not None and id(n) not in seen:
                seen.add(id(n))
                out.append(n)
        return out

    def offset(self, node: Node, page: str) -> int:
        return self.reg.depth[page] - self.reg.depth[node.start]

    def walk(self, hashes: list[str], loose=None) -> list[tuple[Node, int]]:
        """(node, pages of ``hashes`` it covers) along the cached prefix of ``hashes``.
        ``loose(cached, wanted)``: a cached page the match takes for a different page
        (only the page-ceil-match bug has one)."""
        out = []
        pos = 0

        def same(a, b):
            return a == b or (loose is not None and loose(a, b))

        while pos < len(hashes):
            n = self.owner.get(hashes[pos])
            if n is None and loose is not None:
                hits = [h for h in self.owner if loose(h, hashes[pos])]
                n = self.owner[min(hits, key=self.reg.path.__getitem__)] if hits else None
            if n is None:
                break
            k = 0
            while k < len(n.pages) and pos + k < len(hashes) and same(n.pages[k], hashes[pos + k]):
                k += 1
            if k == 0:
                break
            out.append((n, k))
            pos += k
        return out

    def matched(self, hashes: list[str]) -> int:
        """How many leading pages of ``hashes`` are cached (in any tier)."""
        m = 0
        for h in hashes:
            if h not in self.owner:
                break
            m += 1
        return m

    def touch(self, node: Node) -> None:
        self.clock += 1
        node.last_access = self.clock
        if self.on_touch is not None:
            self.on_touch(node)

    def path(self, node: Node) -> tuple:
        """The node's identity for outsiders: the token path of its last page."""
        return self.reg.path[node.end]

    # -- edits ----------------------------------------------------------------------------

    def add(self, parent: Node | None, pages: list[str]) -> Node:
        parent = parent or self.root
        node = Node(list(pages), parent)
        parent.children[node.start] = node
        for h in pages:
            self.owner[h] = node
        self.by_end[node.end] = node
        self.touch(node)
        return node

    def split(self, node: Node, k: int) -> Node:
        """_split_node: cut after the node's k-th page. The new upper half is returned; the
        lower half stays the same object (it keeps its end). The upper half copies the
        node's tier states and counters and takes its share of slots; the caller fixes
        what must not simply be copied (host references)."""
        if not 0 < k < len(node.pages):
            raise ValueError(f"split at {k} of a {len(node.pages)}-page node")
        upper = Node(node.pages[:k], node.parent)
        for attr in ("dev", "host", "lock_ref", "host_ref", "hit_count", "lbp", "released", "last_access"):
            setattr(upper, attr, getattr(node, attr))
        if node.dev_slots is not None:
            upper.dev_slots, node.dev_slots = node.dev_slots[:k], node.dev_slots[k:]
        if node.host_slots is not None:
            upper.host_slots, node.host_slots = node.host_slots[:k], node.host_slots[k:]
        node.pages = node.pages[k:]
        node.parent.children[upper.start] = upper
        upper.children = {node.start: node}
        node.parent = upper
        for h in upper.pages:
            self.owner[h] = upper
        self.by_end[upper.end] = upper
        return upper

    def remove(self, node: Node) -> None:
        """Detach one node (its children must already be gone or be removed with it)."""
        if node.parent is not None and node.parent.children.get(node.start) is node:
            del node.parent.children[node.start]
        for h in node.pages:
            if self.owner.get(h) is node:
                del self.owner[h]
        if self.by_end.get(node.end) is node:
            del self.by_end[node.end]
