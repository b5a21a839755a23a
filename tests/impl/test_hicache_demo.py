"""The demo: a shared-prefix workload in production mode (threads, auto completion), with
SGLang's metrics printed and every byte verified; mirror release beats the baseline."""

import argparse
import io

import pytest

from tiercheck.cli import main
from tiercheck.commands import demo as demo_command
from tiercheck.errors import UserError
from tiercheck.impl import demo


def parse(*argv):
    p = argparse.ArgumentParser()
    demo_command.add_arguments(p)
    return p.parse_args(list(argv))


def test_demo_prints_metrics_and_mirror_release_beats_the_baseline():
    args = parse("--sessions", "8", "--groups", "2", "--prefix-pages", "4", "--device-pages", "32",
                 "--host-pages", "12")
    out = io.StringIO()
    fixed = demo.run_arm(args, False, out)
    base = demo.run_arm(args, True, out)
    text = out.getvalue()
    assert 'sglang:hicache_write_rejected_tokens_total{reason="host_alloc_failed",stage="write_through"}' in text
    assert "sglang:backuped_tokens_total" in text and "sglang:prefetched_tokens_total" in text
    assert text.count("verify: all bytes correct") == 2
    assert fixed["problems"] == [] and base["problems"] == []
    assert fixed["rejected"] < base["rejected"]
    assert fixed["cold"]["sglang:backuped_tokens_total"] > base["cold"]["sglang:backuped_tokens_total"]
    assert fixed["storage_hit"] > 0


def test_demo_command_contract_and_bad_arguments(capsys):
    assert demo_command.NAME == "demo" and demo_command.HELP
    assert main(["demo", "--sessions", "0"]) == 2
    err = capsys.readouterr().err
    assert "--sessions" in err and "must be an integer [1, 4096], got 0" in err and err.count("\n") == 1
    with pytest.raises(UserError, match="does not fit --device-pages"):
        demo_command.run(parse("--device-pages", "4"))
    assert demo.main(["--sessions", "2", "--groups", "1", "--rounds", "1", "--prefix-pages", "2",
                      "--device-pages", "8", "--host-pages", "4"]) == 0
