"""The compiled cores are present where they must be.

``scripts/test`` (and so CI) sets ``CHUNKSTREAM_REQUIRE_NATIVE=1``: there the cores must have
been built and loaded, or the suite would compare the Python twins with themselves and the
throughput would silently fall back.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from worker.chunking._native import PURE_PYTHON_ENV, REQUIRE_NATIVE_ENV
from worker.chunking.rules import adaptive, lexical, sentence


@pytest.mark.skipif(os.environ.get(REQUIRE_NATIVE_ENV) != "1", reason="cores not required here")
def test_cores_are_loaded() -> None:
    assert adaptive.compiled() is not None, "worker/chunking/_native/_adaptive_core was not built"
    assert lexical.compiled() is not None, "worker/chunking/_native/_lexical_core was not built"
    assert sentence.compiled() is not None, "worker/chunking/_native/_sentence_core was not built"


def test_pure_python_switch_turns_the_cores_off() -> None:
    code = (
        "from worker.chunking.rules import adaptive, lexical, sentence;"
        "from worker.chunking import _native;"
        "print(adaptive.compiled() is None and lexical.compiled() is None"
        " and sentence.compiled() is None and _native.layout_sentences() is None)"
    )
    env = {**os.environ, PURE_PYTHON_ENV: "1"}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "True"
