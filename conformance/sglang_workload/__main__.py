"""python -m tiercheck.conformance.sglang_workload: the starvation table (tiercheck sglang-starvation)."""

import sys

from tiercheck.commands.sglang_starvation import main

sys.exit(main())
