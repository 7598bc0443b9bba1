"""`python -m worker.cli`: the same as the `chunkstream` console script."""

import sys

from worker.cli import main

sys.exit(main())
