"""Whether the compiled chunking cores may be used.

The rule-based strategies have a compiled core (C, built by ``setup.py`` as an optional
extension) and a pure-Python twin that defines their behaviour. The core is used when it was
built and imports; ``CHUNKSTREAM_PURE_PYTHON=1`` forces the twins (to compare, or to rule the
core out while debugging). Both give identical chunks: tests compare them.
"""

from __future__ import annotations

import os

PURE_PYTHON_ENV = "CHUNKSTREAM_PURE_PYTHON"
REQUIRE_NATIVE_ENV = "CHUNKSTREAM_REQUIRE_NATIVE"


def allowed() -> bool:
    """False when the environment asks for the pure-Python twins."""
    return os.environ.get(PURE_PYTHON_ENV, "") != "1"
