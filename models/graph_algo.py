"""Graph algorithms on the explored state graph (numpy/scipy: millions of edges).

The graph is the search's edge list (``src``, ``dst``: state indices; ``kind``: action
name ids). All functions take plain arrays and return numpy arrays.
"""

from __future__ import annotations

from collections import deque
from typing import Optional

import numpy as np

# scipy is imported where it is used: every command loads this module (model files name
# liveness properties), and importing scipy.sparse costs about a second.


def edges(search):
    src = np.frombuffer(search.src, dtype=np.int32).astype(np.int64) if len(search.src) else np.zeros(0, np.int64)
    dst = np.frombuffer(search.dst, dtype=np.int32).astype(np.int64) if len(search.dst) else np.zeros(0, np.int64)
    kind = np.frombuffer(bytes(search.kind), dtype=np.uint8)
    return src, dst, kind


def _csr(n: int, src, dst):
    from scipy.sparse import csr_matrix

    data = np.ones(len(src), dtype=np.int8)
    return csr_matrix((data, (src, dst)), shape=(n, n))


def reach(n: int, src, dst, seeds, allowed_nodes=None) -> np.ndarray:
    """Boolean mask of the nodes reachable from ``seeds`` along edges src->dst; with
    ``allowed_nodes`` (mask) the walk stays inside it (seeds outside it are dropped)."""
    seeds = np.asarray(seeds, dtype=np.int64)
    if allowed_nodes is not None:
        keep = allowed_nodes[src] & allowed_nodes[dst]
        src, dst = src[keep], dst[keep]
        seeds = seeds[allowed_nodes[seeds]] if len(seeds) else seeds
    out = np.zeros(n, dtype=bool)
    if not len(seeds):
        return out
    # One extra node n feeds every seed: a single BFS from it.
    s2 = np.concatenate([src, np.full(len(seeds), n, dtype=np.int64)])
    d2 = np.concatenate([dst, seeds])
    from scipy.sparse.csgraph import breadth_first_order

    order = breadth_first_order(_csr(n + 1, s2, d2), n, directed=True, return_predecessors=False)
    out[order[order < n]] = True
    return out


def scc_labels(n: int, src, dst):
    """(count, label per node) of the strongly connected components."""
    from scipy.sparse.csgraph import connected_components

    return connected_components(_csr(n, src, dst), directed=True, connection="strong")


def shortest_path(n: int, src, dst, start: int, targets, allowed_nodes=None) -> Optional[list]:
    """Nodes of a shortest path from ``start`` to any node in the ``targets`` mask, staying
    inside ``allowed_nodes``; ties go to the lowest-numbered edge. None if unreachable."""
    if targets[start]:
        return [start]
    order = np.argsort(src, kind="stable")
    s_sorted, d_sorted = src[order], dst[order]
    starts = np.searchsorted(s_sorted, np.arange(n + 1))
    prev = {start: -1}
    q = deque([start])
    while q:
        u = q.popleft()
        for v in d_sorted[starts[u] : starts[u + 1]].tolist():
            if v in prev or (allowed_nodes is not None and not allowed_nodes[v]):
                continue
            prev[v] = u
            if targets[v]:
                path = [v]
                while prev[path[-1]] >= 0:
                    path.append(prev[path[-1]])
                return path[::-1]
            q.append(v)
    return None
