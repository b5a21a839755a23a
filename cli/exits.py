"""Exit codes CI can rely on, the same for every command (and named in every --help)."""

OK = 0  # complete and clean
FOUND = 1  # a property is violated, or the implementation disagrees with the spec
BAD_INPUT = 2  # a model file, trace, argument or output path was refused before any work
INCONCLUSIVE = 3  # partial run: a limit was reached (prove: z3's resource limit), interrupted, a worker died

EPILOG = (
    "exit status: 0 complete and clean; 1 violation found or implementation disagrees; "
    "2 bad input (one line on stderr, nothing run); 3 inconclusive (partial run: "
    "--max-states/--time-limit/--max-memory reached, a proof out of z3's resource limit, interrupted, "
    "or a worker died)"
)
