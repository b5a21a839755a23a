"""python -m tiercheck.conformance.sglang_workload: the starvation table (tiercheck sglang starvation)."""

import sys

from tiercheck.conformance.sglang_workload.command import main

sys.exit(main())
