"""`python -m repro`: the same command line as `repro` (torchrun launches it this way)."""

import sys

from repro.cli import main

sys.exit(main())
