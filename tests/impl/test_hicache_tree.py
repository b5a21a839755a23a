"""Page identities and the radix tree's structure (splits at page boundaries)."""

import pytest

from tiercheck.errors import UserError
from tiercheck.impl.hicache.pages import PageRegistry
from tiercheck.impl.hicache.tree import RadixTree


def test_page_hashes_are_chained_and_shared_by_prefixes():
    reg = PageRegistry(2)
    a = reg.hashes([1, 2, 3, 4])
    b = reg.hashes([1, 2, 3, 5])
    c = reg.hashes([9, 9, 3, 4])
    assert a[0] == b[0] and a[1] != b[1]
    assert c[1] != a[1]  # same page tokens, different path: a different page
    assert reg.path[a[1]] == (1, 2, 3, 4) and reg.depth[a[1]] == 2 and reg.parent[a[1]] == a[0]
    assert reg.of_path((1, 2, 3, 4)) == a[1]
    assert PageRegistry(2).hashes([1, 2, 3, 4]) == a  # deterministic across ranks/processes


def test_partial_pages_are_refused():
    with pytest.raises(UserError, match="not a whole number of pages"):
        PageRegistry(4).hashes([1, 2, 3])


def test_split_keeps_the_lower_half_and_moves_slots():
    reg = PageRegistry(1)
    t = RadixTree(reg)
    hs = reg.hashes([1, 2, 3])
    n = t.add(None, hs)
    n.dev_slots, n.host_slots, n.lock_ref = [10, 11, 12], [20, 21, 22], 2
    upper = t.split(n, 1)
    assert upper.pages == hs[:1] and n.pages == hs[1:]
    assert (upper.dev_slots, n.dev_slots) == ([10], [11, 12])
    assert (upper.host_slots, n.host_slots) == ([20], [21, 22])
    assert upper.lock_ref == 2 and n.parent is upper and upper.parent is t.root
    assert t.owner[hs[0]] is upper and t.owner[hs[2]] is n
    assert t.node_at(hs[0]) is upper and t.node_at(hs[2]) is n
    assert [x for x, _ in t.walk(reg.hashes([1, 2, 4]))] == [upper, n]
    assert t.walk(reg.hashes([1, 2, 4]))[1][1] == 1
    assert t.path(n) == (1, 2, 3) and t.covering(hs) == [upper, n]
    t.remove(n)
    assert hs[2] not in t.owner and upper.children == {}


def test_the_implementation_never_imports_the_spec_or_the_models():
    import ast
    from pathlib import Path

    import tiercheck.impl as impl

    root = Path(impl.__file__).parent
    for path in [*root.glob("hicache/*.py"), root / "demo.py"]:
        for n in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in n.names] if isinstance(n, ast.Import) else (
                [n.module or ""] if isinstance(n, ast.ImportFrom) else [])
            for name in names:
                assert not name.startswith(("tiercheck.spec", "tiercheck.models")), (path, name)
