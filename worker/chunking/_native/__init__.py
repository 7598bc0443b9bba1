"""The compiled chunking cores and the one way they are loaded.

The rule-based strategies ``sentence``, ``adaptive`` and ``lexical`` have a compiled core (C,
built by ``setup.py`` as optional extensions living in this folder, with ``.pyi`` stubs) and a
pure-Python twin that defines their behaviour. Both give identical chunks: tests compare them.

One convention for every core:

- a strategy module loads its core with :func:`load`, handing it the function that configures
  the core from the module's own tables (the Python side is where every rule and word list is
  stated; the C receives them);
- it keeps the configured entry point in a module attribute named ``NATIVE_CHUNK``, ``None``
  when the core is not built or not allowed; its chunker calls the twin when it is ``None``
  (tests monkeypatch it to ``None`` to force the twin);
- ``CHUNKSTREAM_PURE_PYTHON=1`` makes :func:`load` return ``None`` for every core (to compare,
  or to rule the cores out while debugging); ``CHUNKSTREAM_REQUIRE_NATIVE=1`` makes
  ``tests/chunking/test_native.py`` fail when a core was not built (CI sets it).
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from types import ModuleType

PURE_PYTHON_ENV = "CHUNKSTREAM_PURE_PYTHON"
REQUIRE_NATIVE_ENV = "CHUNKSTREAM_REQUIRE_NATIVE"


def allowed() -> bool:
    """False when the environment asks for the pure-Python twins."""
    return os.environ.get(PURE_PYTHON_ENV, "") != "1"


def load(name: str, configure: Callable[[ModuleType], None]) -> ModuleType | None:
    """The core ``worker.chunking._native.<name>``, configured, or None when it is not built
    or the twins are forced."""
    if not allowed():
        return None
    try:
        core = importlib.import_module(f"{__name__}.{name}")
    except ImportError:
        return None
    configure(core)
    return core
