"""The curated public surface for library users; changing it should be deliberate.

Like httpx's tests/test_exported_members.py: ``__all__`` is pinned, every name resolves to
the object defined where the docs say, and importing the packages stays cheap (no aiokafka, no
onnxruntime) until a name that needs them is used.
"""

from __future__ import annotations

import subprocess
import sys

import worker
import worker.chunking


def test_worker_exports() -> None:
    assert worker.__all__ == [
        "Chunk",
        "Settings",
        "Worker",
        "__version__",
        "build",
        "build_context",
        "chunk_document",
        "chunk_document_sync",
        "load_settings",
        "open_batcher",
    ]
    from worker.app import Worker
    from worker.chunking.types import Chunk
    from worker.config import Settings
    from worker.inference.serving import build_context, build_strategy

    assert worker.Chunk is Chunk
    assert worker.Settings is Settings
    assert worker.build is build_strategy  # the registry's build with the worker's models
    assert worker.build_context is build_context
    assert worker.Worker is Worker
    for name in worker.__all__:
        assert getattr(worker, name) is not None
        assert name in dir(worker)


def test_chunking_exports() -> None:
    assert worker.chunking.__all__ == [
        "AdaptiveChunker",
        "AdaptiveParams",
        "BuildContext",
        "BuiltStrategy",
        "Chunk",
        "ContentType",
        "ContextChunker",
        "ContextParams",
        "InvalidParameters",
        "LexicalChunker",
        "LexicalParams",
        "NoSuchStrategy",
        "SDPMChunker",
        "SDPMParams",
        "SemanticChunker",
        "SemanticParams",
        "SentenceChunker",
        "SentenceParams",
        "Span",
        "StrategyError",
        "build",
        "names",
    ]
    for name in worker.chunking.__all__:
        assert getattr(worker.chunking, name) is not None
    # Every registered strategy's chunker and parameters are exported.
    assert worker.chunking.names() == [
        "adaptive",
        "context",
        "lexical",
        "sdpm",
        "semantic",
        "sentence",
    ]
    for name in worker.chunking.names():
        built = worker.chunking.build(name)
        assert type(built.chunker).__name__ in worker.chunking.__all__


def test_a_library_user_chunks_with_the_public_names_only() -> None:
    text = "One sentence here. Another sentence there. A third."
    built = worker.build("sentence", {"chunk_size": 25})
    chunks = worker.chunk_document_sync(built, text, "text/plain", None)
    assert all(isinstance(c, worker.Chunk) for c in chunks)
    assert [text[c.start_index : c.end_index] for c in chunks] == [c.text for c in chunks]
    assert worker.load_settings({}, env={}) == worker.Settings()


def test_importing_the_packages_loads_no_kafka_client_and_no_inference_runtime() -> None:
    code = (
        "import sys, worker, worker.chunking;"
        "worker.chunking.build('lexical'); worker.build('sentence'); worker.Chunk; worker.Settings;"
        "print(sorted(m for m in ('aiokafka', 'onnxruntime') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
