"""The embedded file store: round trip, atomic writes, corruption never served, capacity."""

from __future__ import annotations

import os

import pytest
import torch

from storage_helpers import is_sentinel, make_pages, sentinel_like
from tiercheck.errors import UserError
from tiercheck.impl.storage import FileStore, codes, completed_prefix
from tiercheck.impl.storage.filestore import HEADER, TEMP_PREFIX


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32, torch.int8, torch.float16])
def test_round_trip_any_dtype(file_store, dtype):
    pages = make_pages(3, dtype=dtype, seed=1)
    keys = [f"h{i}.r0" for i in range(3)]
    assert file_store.batch_put(keys, pages) == [0, 0, 0]
    outs = sentinel_like(pages)
    nbytes = pages[0].numel() * pages[0].element_size()
    assert file_store.batch_get(keys + ["absent"], outs + sentinel_like(pages[:1])) == \
        [nbytes] * 3 + [codes.OBJECT_NOT_FOUND]
    for p, o in zip(pages, outs):
        assert torch.equal(p, o)
    assert file_store.batch_exists(keys + ["absent"]) == [1, 1, 1, 0]
    assert file_store.stats["get.OBJECT_NOT_FOUND"] == 1


def test_keys_map_to_safe_distinct_names(file_store):
    pages = make_pages(3)
    keys = ["../../etc/passwd", "a/b\\c:d", "x" * 1000]
    assert file_store.batch_put(keys, pages) == [0, 0, 0]
    names = os.listdir(file_store.root)
    assert len(names) == 3 and all("/" not in n and len(n) == 64 + 3 for n in names)
    outs = sentinel_like(pages)
    file_store.batch_get(keys, outs)
    assert all(torch.equal(p, o) for p, o in zip(pages, outs))


def test_already_exists_is_ok_and_not_rewritten(file_store):
    a, b = make_pages(2, seed=2)
    assert file_store.batch_put(["k"], [a]) == [0]
    path = file_store.path_of("k")
    ino, mtime = os.stat(path).st_ino, os.stat(path).st_mtime_ns
    assert file_store.batch_put(["k"], [b]) == [0]  # like Mooncake: 0, nothing overwritten
    assert (os.stat(path).st_ino, os.stat(path).st_mtime_ns) == (ino, mtime)
    out = sentinel_like([a])[0]
    file_store.batch_get(["k"], [out])
    assert torch.equal(out, a)
    assert file_store.stats["put_already_exists"] == 1


def test_leftover_temp_file_is_never_served_and_swept(tmp_path):
    root = tmp_path / "l3"
    store = FileStore(root, fsync=False)
    page = make_pages(1)[0]
    # A writer that died after writing its temp file but before the rename.
    stale = os.path.join(store.root, TEMP_PREFIX + "dead")
    with open(stale, "wb") as f:
        f.write(b"\0" * 100)
    out = sentinel_like([page])[0]
    assert store.batch_get(["k"], [out]) == [codes.OBJECT_NOT_FOUND]
    assert store.batch_exists(["k"]) == [0] and is_sentinel(out)
    assert store.used_bytes == 0  # temp files are not stored objects
    reopened = FileStore(root, fsync=False, stale_temp_age_s=0.0)
    assert not os.path.exists(stale) and reopened.stats["stale_temp_removed"] == 1


def test_crash_before_rename_leaves_no_object(file_store, monkeypatch):
    page = make_pages(1)[0]

    def crash(src, dst):
        raise OSError(5, "simulated crash before rename")

    monkeypatch.setattr(os, "replace", crash)
    assert file_store.batch_put(["k"], [page]) == [codes.INTERNAL_ERROR]
    monkeypatch.undo()
    assert os.listdir(file_store.root) == []  # temp removed, no final file
    assert file_store.batch_exists(["k"]) == [0]
    assert file_store.stats["io_error"] == 1 and file_store.stats["put.INTERNAL_ERROR"] == 1


@pytest.mark.parametrize("cut", ["header", "key", "payload", "one_byte"])
def test_truncated_file_is_never_served(file_store, cut):
    page = make_pages(1, seed=3)[0]
    file_store.batch_put(["page.r0"], [page])
    path = file_store.path_of("page.r0")
    size = os.path.getsize(path)
    keep = {"header": HEADER.size - 5, "key": HEADER.size + 2,
            "payload": size - 100, "one_byte": size - 1}[cut]
    os.truncate(path, keep)
    assert file_store.batch_exists(["page.r0"]) == [0]
    out = sentinel_like([page])[0]
    assert file_store.batch_get(["page.r0"], [out]) == [codes.CHECKSUM_MISMATCH]
    assert is_sentinel(out), "a truncated page must not reach the destination"
    assert file_store.stats["corrupt"] >= 1 and file_store.stats["get.CHECKSUM_MISMATCH"] == 1
    # quarantined, and the next backup of the page rewrites it
    assert not os.path.exists(path)
    assert file_store.batch_put(["page.r0"], [page]) == [0]
    assert file_store.batch_get(["page.r0"], [out]) == [page.numel() * 2]
    assert torch.equal(out, page)


def test_truncated_file_is_rewritten_by_put(file_store):
    page = make_pages(1, seed=4)[0]
    file_store.batch_put(["k"], [page])
    os.truncate(file_store.path_of("k"), 40)
    assert file_store.batch_put(["k"], [page]) == [0]  # not "already exists": it was broken
    assert file_store.stats["corrupt_replaced"] == 1
    out = sentinel_like([page])[0]
    assert file_store.batch_get(["k"], [out]) == [page.numel() * 2] and torch.equal(out, page)


@pytest.mark.parametrize("where", ["magic", "payload_first", "payload_last", "digest"])
def test_flipped_byte_is_never_served(file_store, where):
    pages = make_pages(2, seed=5)
    file_store.batch_put(["a", "b"], pages)
    path = file_store.path_of("b")
    size = os.path.getsize(path)
    pos = {"magic": 0, "payload_first": size - pages[1].numel() * 2, "payload_last": size - 1,
           "digest": HEADER.size - 1}[where]
    with open(path, "r+b") as f:
        f.seek(pos)
        byte = f.read(1)[0]
        f.seek(pos)
        f.write(bytes([byte ^ 0x01]))
    outs = sentinel_like(pages)
    res = file_store.batch_get(["a", "b"], outs)
    assert res == [pages[0].numel() * 2, codes.CHECKSUM_MISMATCH]
    assert completed_prefix(res) == 1
    assert torch.equal(outs[0], pages[0]) and is_sentinel(outs[1])
    assert file_store.stats["corrupt"] == 1 and file_store.stats["corrupt_removed"] == 1


def test_wrong_destination_size_is_refused(file_store):
    page = make_pages(1)[0]
    file_store.batch_put(["k"], [page])
    small = torch.zeros(page.numel() - 1, dtype=page.dtype)
    small.view(torch.uint8).fill_(7)
    assert file_store.batch_get(["k"], [small]) == [codes.LENGTH_MISMATCH]
    assert bool((small.view(torch.uint8) == 7).all())
    assert os.path.exists(file_store.path_of("k"))  # a caller mistake is not corruption


def test_capacity_gives_no_space_and_is_recovered(tmp_path):
    pages = make_pages(5)
    probe = FileStore(tmp_path / "probe", fsync=False)
    probe.batch_put(["k0"], pages[:1])
    one = probe.used_bytes
    store = FileStore(tmp_path / "l3", capacity_bytes=3 * one, fsync=False)
    keys = [f"k{i}" for i in range(5)]
    res = store.batch_put(keys, pages)
    assert res == [0, 0, 0, codes.NO_SPACE, codes.NO_SPACE]
    assert completed_prefix(res) == 3 and store.used_bytes == 3 * one
    assert store.stats["put.NO_AVAILABLE_HANDLE"] == 2
    assert store.batch_exists(keys) == [1, 1, 1, 0, 0]
    assert store.delete(["k0", "zz"]) == [0, codes.OBJECT_NOT_FOUND]
    assert store.batch_put(["k3"], [pages[3]]) == [0]
    # the account survives a reopen (scan of the directory)
    assert FileStore(tmp_path / "l3", capacity_bytes=3 * one).used_bytes == 3 * one


def test_misuse_gives_one_line_errors(tmp_path, file_store):
    page = make_pages(2)[0]
    with pytest.raises(ValueError, match="contiguous CPU tensor"):
        file_store.batch_put(["k"], [torch.zeros(4, 4).t()])
    with pytest.raises(ValueError, match="1 keys but 2 tensors"):
        file_store.batch_put(["k"], [page, page])
    with pytest.raises(ValueError, match="non-empty str"):
        file_store.batch_get([""], [page])
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(UserError, match="cannot create directory"):
        FileStore(blocker / "sub")
    with pytest.raises(UserError, match="capacity_bytes"):
        FileStore(tmp_path / "x", capacity_bytes=-1)
    file_store.close()
    with pytest.raises(RuntimeError, match="after close"):
        file_store.batch_exists(["k"])
