"""history.md from a history campaign's results, without SGLang: findings are grouped by
signature across runs and releases, and each release's cell says what the finding's
traces do there. Runs in the default test command."""

from tiercheck.conformance.sglang.history_report import finding_id, group, write_report

LEAK = "state at insert: host_free, node.host, node.lock_ref, write_queue (some ranks)"
HANG = "state at writing_check: hung"


def _data():
    rels = ["0.5.13", "0.5.14", "0.5.15"]
    results = [{"release": r, "seconds": 1.0, "setup_seconds": 0.0, "rows": [
        {"kind": "conform", "model": "sglang/wt-alloc-2r", "backend": "gloo", "result": "disagrees", "steps": 10,
         "findings": [{"signature": LEAK}] + ([{"signature": HANG}] if r == "0.5.13" else [])},
    ]} for r in rels] + [{"release": "0.5.9", "skipped": "no shim"}]
    findings = [
        {"release": r, "run": "wt-alloc-2r@gloo", "trace": f"t/leak-{r}.json", "signature": LEAK, "message": "m",
         "passes": [], "steps": 1, "backend": "gloo"} for r in rels
    ] + [{"release": "0.5.13", "run": "wt-alloc-2r@gloo", "trace": "t/hang.json", "signature": HANG, "message": "h",
          "passes": [LEAK], "steps": 2, "backend": "gloo"}]
    replays = {r: {f"t/leak-{x}.json": {"result": "disagrees", "signature": LEAK} for x in rels} for r in rels}
    for r in rels:
        replays[r]["t/hang.json"] = {"result": "disagrees", "signature": HANG} if r == "0.5.13" else {"result": "agrees"}
    replays["0.5.15"]["t/hang.json"] = {"result": "unreached"}
    return {"results": results, "findings": findings, "replays": replays,
            "budget": {"examples": 1, "steps": 1, "seed": 0, "runs": ["sglang/wt-alloc-2r@gloo"], "tours": []}}


def test_one_finding_per_signature():
    groups = group(_data()["findings"])
    assert [g["signature"] for g in groups] == [LEAK, HANG]
    leak, hang = groups
    assert leak["found_on"] == ["0.5.13", "0.5.14", "0.5.15"] and len(leak["traces"]) == 3
    assert hang["passes"]["t/hang.json"] == [LEAK]
    assert finding_id(HANG) == finding_id(HANG) != finding_id(LEAK)
    assert finding_id(HANG).startswith("state-writing_check-")


def test_cells_say_what_each_release_does(tmp_path):
    write_report(_data(), tmp_path / "history.md")
    text = (tmp_path / "history.md").read_text()
    row = next(line for line in text.splitlines() if line.startswith(f"| [{finding_id(HANG)}]"))
    assert row.split(" | ")[3:6] == ["**caught**", "clean", "unreached"]
    assert "passing `" + LEAK + "`" in text  # the replay line names what the trace passes
    assert "| 0.5.9 | skipped: no shim |" in text


def test_a_run_that_conforms_without_its_models_actions_says_so(tmp_path):
    data = _data()
    taken = {"insert": 5, "evict": 1, "writing_check": 1, "write_dma_done": 1, "load_back": 1, "loading_check": 1,
             "load_dma_done": 1, "storage_backup_done": 1, "drain_storage_control_queues": 1}
    row = {"kind": "conform", "model": "sglang/wt-prefetch-2r", "backend": "gloo", "result": "conforms",
           "steps": 9, "actions": {**taken, "prefetch_from_storage": 0, "prefetch_io": 0,
                                   "check_prefetch_progress": 0}}
    data["results"][0]["rows"] += [row, {**row, "strategy": "coverage",
                                         "actions": {**taken, "prefetch_from_storage": 2, "prefetch_io": 1,
                                                     "check_prefetch_progress": 1}}]
    write_report(data, tmp_path / "history.md")
    text = (tmp_path / "history.md").read_text()
    assert "| conform `sglang/wt-prefetch-2r@gloo` | conforms (9), prefetch not reached |" in text
    assert "| conform `sglang/wt-prefetch-2r@gloo~coverage` | conforms (9) |" in text
