"""Compiled cores of the rule-based chunkers (C, CPython API, no third-party headers).

Each core has a pure-Python twin in ``worker/chunking`` that defines its behaviour and that
tests compare it with. ``optional=True``: where no C compiler is available the install still
succeeds and the worker runs on the Python twins (slower, same output); ``scripts/test`` sets
``CHUNKSTREAM_REQUIRE_NATIVE=1`` so that CI cannot pass on the fallback unnoticed.
"""

from setuptools import Extension, setup

_FLAGS = ["-O2", "-std=c11", "-ffp-contract=off", "-Wall", "-Wextra", "-Wno-unused-parameter"]
_CHUNKING = "worker/chunking/_native"
# Headers each core includes (`depends`: an edit to one rebuilds the core). The sentence rules
# are shared by the three cores; the _lexical_*.h files are the parts of _lexical_core.c's one
# translation unit (its opening comment says why and what each holds).
_SENTENCE_RULES = [f"{_CHUNKING}/_sentence_rules.h"]
# text/structure.py, units.py, packing.py in C: parts of the sentence and adaptive cores' (and
# lexical's) translation units.
_SENTENCE_PARTS = [f"{_CHUNKING}/_{part}.h" for part in ("structure", "wordpiece", "piece_cache", "units", "packing")]
_LEXICAL_PARTS = [
    f"{_CHUNKING}/_lexical_{part}.h"
    for part in (
        "config", "text", "spans", "keywords", "reading", "ladder", "assembly", "configure",
    )
]  # fmt: skip

setup(
    ext_modules=[
        Extension(
            "worker.chunking._native._adaptive_core",
            [f"{_CHUNKING}/_adaptive_core.c"],
            depends=_SENTENCE_RULES + _SENTENCE_PARTS,
            extra_compile_args=_FLAGS,
            optional=True,
        ),
        Extension(
            "worker.chunking._native._sentence_core",
            [f"{_CHUNKING}/_sentence_core.c"],
            # The static model's rows and the layout's sentences live in this core only.
            depends=_SENTENCE_RULES
            + _SENTENCE_PARTS
            + [f"{_CHUNKING}/_static_rows.h", f"{_CHUNKING}/_layout_sentences.h"],
            extra_compile_args=_FLAGS,
            optional=True,
        ),
        Extension(
            "worker.chunking._native._lexical_core",
            [f"{_CHUNKING}/_lexical_core.c"],
            depends=_SENTENCE_RULES + _SENTENCE_PARTS + _LEXICAL_PARTS,
            extra_compile_args=_FLAGS,
            optional=True,
        ),
    ]
)
