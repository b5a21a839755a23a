"""Model file validation: each error is one line naming the file and the key."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tiercheck.errors import UserError
from tiercheck.models import model_file

GOOD = """
[model]
requests = [[1, 2], [1, 3]]
device_pages = 3
host_pages = 2
"""


def _write(tmp_path, text, name="m.toml"):
    p = tmp_path / name
    p.write_text(text)
    return p


def test_a_good_file_loads_with_defaults(tmp_path):
    mf = model_file.load(str(_write(tmp_path, GOOD)))
    assert mf.config.requests == ((1, 2), (1, 3)) and mf.config.policy == "write_through"
    assert "no_ghost" in mf.properties and "rank_agreement" not in mf.properties


@pytest.mark.parametrize(
    "text, key, words",
    [
        ("[model]\nrequests = [[1]]\nbogus = 1\n", "model.bogus", "unknown key"),
        ("[model]\nrequests = [[1]]\n[other]\n", "other", "unknown table"),
        ("[check]\n", "[model]", "missing table"),
        ("[model]\ndevice_pages = 3\n", "model.requests", "missing"),
        ("[model]\nrequests = [[1, 'a']]\n", "model.requests", "lists of integers"),
        ("[model]\nrequests = []\n", "model.requests", "non-empty"),
        ("[model]\nrequests = [[1]]\nranks = 0\n", "model.ranks", "integer in [1, 8]"),
        ("[model]\nrequests = [[1]]\nranks = true\n", "model.ranks", "integer"),
        ("[model]\nrequests = [[1]]\nstorage = 1\n", "model.storage", "true or false"),
        ("[model]\nrequests = [[1]]\npolicy = 'lru'\n", "model.policy", "not one of"),
        ("[model]\nrequests = [[1]]\nvariants = ['nope']\n", "model.variants", "unknown name 'nope'"),
        ("[model]\nrequests = [[1]]\nfaults = ['meteor']\n", "model.faults", "unknown name 'meteor'"),
        ("[model]\nrequests = [[1]]\nfaults = 'x'\n", "model.faults", "list of names"),
        ("[model]\nrequests = [[1]]\nmirror_release = true\n", "model.mirror_release", "needs storage"),
        ("[model]\nrequests = [[1]]\nduplicate_reclaim = true\n", "model.duplicate_reclaim", "write_back"),
        ("[model]\nrequests = [[1]]\nprefetch = true\n", "model.prefetch", "needs storage"),
        ("[model]\nrequests = [[1]]\nfaults = ['store_loss']\n", "model.faults", "needs storage"),
        ("[model]\nrequests = [[1]]\nfaults = ['registry_skew']\n", "model.faults", "duplicate_reclaim"),
        ("[model]\nrequests = [[1]]\n[check]\nproperties = ['fairness']\n", "check.properties", "unknown property"),
        ("[model]\nrequests = [[1]]\n[check]\nexpect_violation = 'no_ghost'\nproperties = ['slot_conservation']\n",
         "check.expect_violation", "not among"),
        ("[model]\nrequests = [[1]]\n[check]\nsymmetry = 'yes'\n", "check.symmetry", "true or false"),
        ("[model]\nrequests = [[1]]\n[check]\nmax_states = 0\n", "check.max_states", "positive"),
        ("[model]\nrequests = [[1]]\n[check]\nwhatever = 0\n", "check.whatever", "unknown key"),
        ("[model\nrequests = [[1]]\n", "", "not valid TOML"),
        ("[model]\nrequests = [[1, 2, 3]]\nhost_pages = 2\npolicy = 'write_back'\n"
         "[check]\nproperties = ['eviction_progress']\n", "model.host_pages", "longest request (3 pages)"),
        ("[model]\nrequests = [[1, 2, 3]]\nhost_pages = 0\npolicy = 'write_back'\n"
         "[check]\nproperties = ['no_ghost', 'eviction_progress_fair']\n", "model.host_pages", "never leave the device"),
        ("[model]\nrequests = [[1, 2]]\nstorage = true\nmirror_release = true\nhost_free_target = 1\n"
         "[check]\nproperties = ['host_channel_fair']\n", "model.host_free_target", "host_channel_fair needs it"),
        # Random models (docs/random-models.md): no request fits the device pool, one state.
        ("[model]\nrequests = [[1, 2], [3, 4, 5]]\ndevice_pages = 1\n", "model.device_pages",
         "shortest request caches 2 pages"),
        ("[model]\npage_size = 2\nrequests = [[1, 1, 2, 2, 3]]\ndevice_pages = 1\n", "model.device_pages",
         "no request ever fits"),
    ],
)
def test_each_validation_error_names_file_and_key(tmp_path, text, key, words):
    p = _write(tmp_path, text)
    with pytest.raises(UserError) as exc:
        model_file.load(str(p))
    msg = str(exc.value)
    assert msg.startswith(str(p)) and key in msg and words in msg and "\n" not in msg


def test_missing_file_and_unknown_shipped_name():
    with pytest.raises(UserError, match="no such model file"):
        model_file.load("no/such/model.toml")


def test_cli_exits_2_with_one_line_and_no_traceback(tmp_path):
    p = _write(tmp_path, "[model]\nrequests = [[1]]\npolicy = 'lru'\n")
    out = subprocess.run([sys.executable, "-m", "tiercheck", "check", str(p)], capture_output=True, text=True)
    assert out.returncode == 2
    assert out.stderr.strip().count("\n") == 0 and "Traceback" not in out.stderr
    assert "model.policy" in out.stderr


def test_dump_round_trips(tmp_path):
    mf = model_file.load("variants/negated-pair-overflow")
    again = model_file.parse(__import__("tomllib").loads(model_file.dump(mf)), "dumped")
    assert again.config == mf.config and again.properties == mf.properties


@pytest.mark.parametrize("policy, host, checked", [
    ("write_back", 2, False),  # the 3-page node can never be written back: no claim to check
    ("write_back", 3, True),
    ("write_through", 0, True),  # write-through evicts a node with no host copy by dropping it
])
def test_eviction_progress_is_a_default_where_every_request_fits_the_host_pool(tmp_path, policy, host, checked):
    text = f"[model]\nrequests = [[1, 2, 3], [4]]\nhost_pages = {host}\npolicy = '{policy}'\n"
    assert ("eviction_progress" in model_file.load(str(_write(tmp_path, text))).properties) == checked


def test_host_channel_is_no_default_with_prefetch():
    # Found by benchmarks/random_models.py (docs/random-models.md): a node prefetched back
    # from storage has no durable marks, so its mirror is never released and a backup
    # waits forever (findings/mirror-pinned-after-prefetch): a false default on the
    # correct protocol. Where the host pool holds every request it still holds, asked for.
    base = "[model]\nrequests = [[1], [1, 2]]\ndevice_pages = 2\nhost_pages = 1\nstorage = true\n" \
           "mirror_release = true\nhost_free_target = 2\n"
    without = model_file.parse(model_file.loads(base, "m.toml"), "m.toml")
    assert {"host_channel", "host_channel_fair"} <= set(without.properties)
    with_prefetch = model_file.parse(model_file.loads(base + "prefetch = true\n", "m.toml"), "m.toml")
    assert not {"host_channel", "host_channel_fair"} & set(with_prefetch.properties)
    shipped = model_file.load("wt-mirror-prefetch-1r")
    assert "host_channel" in shipped.properties and shipped.config.prefetch
