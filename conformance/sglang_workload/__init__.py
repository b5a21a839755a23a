"""Seed 000's host-pool starvation measured on upstream SGLang, and its mirror-release fix
ported onto the release as a patch (docs/findings/sglang-starvation.md).

    engine.py    one SGLang HiCache on CPU built as the scheduler builds it (the adapter's
                 construction with SGLang's own eviction, copies and storage thread)
    traffic.py   the traffic shapes (tiercheck's reference sessions at page size 1)
    driver.py    a scheduler loop through SGLang's entry points, with counting wrappers
    arms.py      baseline / controls / patched arms; table.py formats them
    patch.py     apply / revert a patch (patches/*.diff + added modules) on a lane
    mirror_conformance.py  the spec's mirror-release models against the patched cache
    patches/     mirror-release.diff and hicache_mirror_release.py (the mechanism)

Everything but traffic.py, table.py and patch.py imports sglang: run it with a lane's interpreter.
"""
