"""tiercheck prove [--variant NAME] [--report DIR] [--unbounded] [--slots] [--no-stored-cores]: the z3 audit. Every inductiveness
obligation (invariant x action) and the consensus theorems, as a table; a failing
obligation prints its counterexample to induction in the spec's names."""

from __future__ import annotations

from tiercheck import exits
from tiercheck.inputs import int_in, output_dir

NAME = "prove"
HELP = "prove the safety invariants inductive with z3 (table, CTIs, Markdown/JSON audit)"


def add_arguments(p):
    p.add_argument("--variant", action="append", default=[], metavar="NAME",
                   help="switch on a bug variant of spec/variants.py (repeatable)")
    p.add_argument("--report", metavar="DIR", help="write proofs.md and proofs.json here")
    p.add_argument("--pages", type=int_in(1, 4), default=None, help="page bound of the universe (1..4, default 2)")
    p.add_argument("--unbounded", action="store_true",
                   help="prove the obligations the page-sorted encoding covers for forests of any size "
                        "(the rest stay bounded by --pages; the table says which)")
    p.add_argument("--workers", type=int_in(1, 256), default=2, help="solver processes (default 2)")
    p.add_argument("--action", action="append", default=[], help="only these actions (repeatable)")
    p.add_argument("--no-stored-cores", action="store_true",
                   help="decide every solver query whole, not first from its stored unsat core "
                        "(proofs/cores.py: about 4x the work, the same verdicts)")
    p.add_argument("--slots", action="store_true",
                   help="also prove slot_ownership's host half with slot identities on (bounded; docs/proofs.md)")


def run(args) -> int:
    from tiercheck.errors import UserError
    from tiercheck.proofs.audit import DEFAULT_PAGES, run_audit, summary_line, table_lines, write_reports
    from tiercheck.proofs.cti import format_cti
    from tiercheck.proofs.obligations import ACTION_NAMES
    from tiercheck.proofs.scope import LIVENESS_ONLY, check_variant

    for v in args.variant:
        check_variant(v, args.unbounded)
        if v in LIVENESS_ONLY:
            print(f"note: {v}: {LIVENESS_ONLY[v]}")
    for a in args.action:
        if a not in ACTION_NAMES:
            raise UserError(f"unknown action {a!r} (known: {', '.join(ACTION_NAMES)})")
    pages = _pages(args, DEFAULT_PAGES)
    if not 1 <= pages <= 4:
        raise UserError(f"--pages {pages}: choose 1..4 (the encoding grows with pages cubed)")
    if args.workers < 1:
        raise UserError("--workers must be at least 1")
    if args.report:
        output_dir(args.report, "--report")
    if args.no_stored_cores:
        from tiercheck.proofs import cores

        cores.set_table({})
    audit = run_audit(args.variant, pages, args.workers, args.action or None, unbounded=args.unbounded,
                      slots=args.slots)
    for line in table_lines(audit):
        print(line)
    print()
    for t in audit.theorems:
        print(f"theorem {t.name:<36} {t.status:<9} {t.seconds:6.2f}s  {t.claim}")
        if t.status == "exhibited" and t.detail:
            print(f"    {t.detail}")
    for r in audit.failed:
        if r.status == "inconclusive":
            print(f"\nINCONCLUSIVE {r.target} under {r.action} (out of z3's resource limit: neither proved nor refuted)")
            continue
        print(f"\nFAILED {r.target} under {r.action}" + ("" if r.cti else f" ({r.status}, no counterexample)"))
        if r.cti:
            for line in format_cti(r.cti):
                print("  " + line)
    if args.report:
        paths = write_reports(audit, args.report)
        print("\nwrote " + ", ".join(str(p) for p in paths))
    print(summary_line(audit))
    if any(r.status == "failed" for r in audit.failed) or any(t.status == "failed" for t in audit.theorems):
        return exits.FOUND  # refuted; a theorem or obligation out of its limit is inconclusive
    return exits.INCONCLUSIVE if audit.failed or not audit.theorems_ok() else exits.OK


def _pages(args, default: int) -> int:
    """--pages, or else the pages the switched-on variants need to show themselves (a
    variant whose smallest counterexample needs 3 pages is proved clean at 2)."""
    from tiercheck.spec.variants import VARIANTS

    need = {v: VARIANTS[v].proof_pages for v in args.variant if VARIANTS[v].proof_pages > default}
    if args.pages is None:
        if need:
            pages = max(need.values())
            print(f"note: pages {pages}: " + ", ".join(f"{v} needs {n} pages to show" for v, n in sorted(need.items())))
            return pages
        return default
    short = {v: n for v, n in need.items() if n > args.pages}
    if short:
        print(f"note: --pages {args.pages} cannot show " + ", ".join(f"{v} (needs {n})" for v, n in sorted(short.items()))
              + ": a clean result says nothing about it")
    return args.pages

