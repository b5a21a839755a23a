"""The spec's mirror-release models against SGLang 0.5.23 with the mirror-release patch.

The adapter of conformance/sglang*.py, extended with the refinement of the patch's state
(``cache.mirror_release``): durable pages, the prepared plan, the mismatch count, the
fail-closed flag, released mirrors. What the harness controls, besides what the adapter
already controls (docs/sglang.md):

* the release round runs in the spec's ``drain_storage_control_queues`` action only. The
  patch rides SGLang's fused per-iteration round, which the adapter runs once per spec
  sync action; for ``writing_check`` / ``loading_check`` it calls the unwrapped round (in
  SGLang's scheduler the three parts are one iteration, so this only fixes where the
  adapter splits it).
* candidates in the spec's order (by end page), and the spec's constants
  (``host_free_target``, ``fail_close_after``) instead of the patch's defaults.

    python -m tiercheck.conformance.sglang_workload.mirror_conformance MODEL [--examples N] [--steps N]

1 rank (lockstep) only. Needs the patch applied to the lane.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import types

from tiercheck.errors import UserError

from ..sglang import controls as ctl
from ..sglang import driver as adapter
from ..sglang import core as sglang_rank
from ..sglang.core import SGLangRank

FLAG = "SGLANG_HICACHE_MIRROR_RELEASE"
# Summed over every cache a run built: evidence that the release ran, not only conformed.
TOTALS = {"caches": 0, "released_tokens": 0, "committed_plans": 0, "grafted_tokens": 0}


class MirrorRank(SGLangRank):
    def __init__(self, cfg, rank=0, world=1, group=None, storage_dir=None):
        old = os.environ.get(FLAG)
        os.environ[FLAG] = "1"
        try:
            super().__init__(cfg, rank, world, group, storage_dir)
        finally:
            if old is None:
                os.environ.pop(FLAG, None)
            else:
                os.environ[FLAG] = old
        self.mr = getattr(self.cache, "mirror_release", None)
        if self.mr is None:
            self.close()
            raise UserError("the mirror-release patch is not active in this lane (apply it: python -m "
                            "tiercheck.conformance.sglang_workload.patch apply mirror-release)")
        index = self.model.pages.index
        self.mr.order = lambda node: index[ctl.node_path(node)]
        self.mr.target_free = cfg.host_free_target
        self.mr.mismatch_limit = cfg.fail_close_after

    def close(self):
        mr = getattr(self, "mr", None)
        if mr is not None:
            TOTALS["caches"] += 1
            TOTALS["released_tokens"] += mr.released_tokens
            TOTALS["committed_plans"] += mr.committed
            TOTALS["grafted_tokens"] += mr.grafted_tokens
        super().close()

    def _round(self, part: str):
        if part == "drain_storage_control_queues":
            return super()._round(part)
        cache = self.cache
        ride = cache._sync_hicache_ready_counts
        cache._sync_hicache_ready_counts = types.MethodType(type(cache)._sync_hicache_ready_counts, cache)
        try:
            return super()._round(part)
        finally:
            cache._sync_hicache_ready_counts = ride

    def _durable_paths(self):
        return [path for path, key in self.key_of.items() if key in self.mr.durable]

    def snapshot(self) -> dict:
        snap = super().snapshot()
        mr, tree = self.mr, {end: x for x, end, _ in self.nodes()}
        in_tree = set()
        for end, x in tree.items():
            cd = x.component_data[sglang_rank.FULL]  # bound when the first cache is built
            node = snap["nodes"][end]
            # Released: the device copy stays, the host copy was freed, storage holds every page.
            node["released"] = bool(cd.value is not None and cd.host_value is None
                                    and not mr.closed and mr._all_durable(x))
            in_tree.update(end[:len(end) - i] for i in range(len(x.key)))
        snap["durable"] = [p for p in self._durable_paths() if p in in_tree]
        snap["plan"] = [ctl.node_path(x) for x in mr.plan]
        snap["mismatch"] = mr.mismatches
        snap["closed"] = mr.closed
        return snap


class MirrorDriver(adapter.SGLangDriver):
    name = "sglang+mirror-release"

    def __init__(self, cfg, timeout: float = 30.0):
        if not cfg.mirror_release:
            raise UserError("mirror conformance: the model must have mirror_release = true")
        if cfg.ranks != 1:
            raise UserError("mirror conformance: 1 rank only (the gloo ranks build the unpatched adapter)")
        # prefetch and the MLA single writer are driven by the adapter, not with the patch.
        unmapped = [f for f in (*adapter.UNSUPPORTED, "prefetch", "single_writer")
                    if f != "mirror_release" and getattr(cfg, f)]
        if unmapped:
            raise UserError(f"mirror conformance: the adapter cannot drive {', '.join(unmapped)}")
        import tempfile

        from tiercheck.spec.model import Model

        self.version = adapter.require_lane()
        self.model = Model(cfg)
        self.hung = ""
        self._tmp = tempfile.TemporaryDirectory(prefix="tiercheck-sglang-l3-")
        self._gloo = None
        self._local = MirrorRank(cfg, 0, 1, None, self._tmp.name)


def main(argv=None) -> int:
    from tiercheck.conformance import machine
    from tiercheck.models import model_file

    p = argparse.ArgumentParser(prog="python -m tiercheck.conformance.sglang_workload.mirror_conformance",
                                description="the spec's mirror-release model against patched SGLang 0.5.23")
    p.add_argument("model")
    p.add_argument("--examples", type=int, default=50)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", help="write a failing trace here")
    a = p.parse_args(argv)
    try:
        cfg = model_file.load(a.model).config
        MirrorDriver(cfg).close()  # fail early, with one line
        stats = {}
        t0 = time.monotonic()
        try:
            machine.run(lambda: MirrorDriver(cfg), examples=a.examples, steps=a.steps, seed=a.seed,
                        record_dir=a.out, label="sglang+mirror-release", stats=stats)
        except machine.ConformanceFailure as exc:
            print(exc)
            return 1
        print(f"patched sglang conforms to the spec on {a.model}: {stats.get('examples', 0)} examples x up to "
              f"{a.steps} steps, seed {a.seed}, {time.monotonic() - t0:.1f}s; over {TOTALS['caches']} caches "
              f"the patch committed {TOTALS['committed_plans']} release plans freeing "
              f"{TOTALS['released_tokens']} mirror tokens")
        return 0
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
