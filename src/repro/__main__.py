"""`python -m repro`: the same command line as `repro` (torchrun launches it this way)."""

import sys

from repro.entry import main

sys.exit(main())
