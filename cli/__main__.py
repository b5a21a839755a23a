import sys

from tiercheck.cli import main

sys.exit(main())
