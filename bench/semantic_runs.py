"""Chunk many documents with the embedding strategies, in this process or with another tree's code.

Shared by the semantic benches: :func:`chunk_all` runs jobs (strategy, parameters, boundary
model) over documents with the APIs every version of the worker since issue 22 has
(``registry.build`` with a ``BuildContext``, ``chunk_document_sync``, ``embed_batch``), each
distinct text embedded once per model (a cache: versions of one document share most texts).
:func:`chunk_in_tree` runs the same in a subprocess on another checkout (``PYTHONPATH=DIR``),
so the code before a change is measured on the same documents in the same run.

A chunk comes back as ``[start, end, spans]`` (``spans`` ``None`` for one slice).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

Job = dict[str, Any]  # {"strategy": str, "params": {...}, "model": "static" | "fp32"}


def job_key(job: Job) -> str:
    params = ",".join(f"{k}={v}" for k, v in sorted(job.get("params", {}).items()))
    return f"{job['strategy']}/{job['model']}" + (f"/{params}" if params else "")


def chunk_all(request: dict[str, Any]) -> dict[str, list[list[list[Any]]]]:
    """``{"docs": [[text, content_type], …], "jobs": [Job, …]}`` → for each job (by
    :func:`job_key`), each document's chunks."""
    import numpy as np

    from worker.chunking import registry
    from worker.inference.batcher import embed_batch
    from worker.models.loading import load_backend
    from worker.models.reference import describe, find
    from worker.pipeline import chunk_document_sync

    transformer = find("retrieval", None)
    refs = {"static": find("boundary", None), "fp32": describe(transformer.directory, "boundary")}
    backends: dict[str, Any] = {}
    caches: dict[str, dict[str, Any]] = {}

    def embedder(model: str) -> Any:
        if model not in backends:
            backends[model] = load_backend(refs[model])
            caches[model] = {}
        backend, cache = backends[model], caches[model]

        def embed(texts: Any) -> Any:
            missing = list(dict.fromkeys(t for t in texts if t not in cache))
            if missing:
                for text, row in zip(missing, embed_batch(backend, missing), strict=True):
                    cache[text] = row
            if not texts:
                return np.zeros((0, backend.dimension), dtype=np.float32)
            return np.stack([cache[t] for t in texts])

        return embed

    results: dict[str, list[list[list[Any]]]] = {}
    for job in request["jobs"]:
        context = registry.BuildContext(boundary=refs[job["model"]], retrieval=transformer)
        built = registry.build(job["strategy"], job.get("params", {}), context)
        embed = embedder(job["model"])
        out = []
        for text, content_type in request["docs"]:
            chunks = chunk_document_sync(built, text, content_type, embed)
            out.append(
                [
                    [
                        c.start_index,
                        c.end_index,
                        None if c.spans is None else [[s.start, s.end] for s in c.spans],
                    ]
                    for c in chunks
                ]
            )
        results[job_key(job)] = out
    return results


def chunk_in_tree(tree: Path, request: dict[str, Any]) -> dict[str, list[list[list[Any]]]]:
    """:func:`chunk_all` with the code of ``tree`` (a subprocess, ``PYTHONPATH=tree``)."""
    done = subprocess.run(
        [sys.executable, __file__],
        input=json.dumps(request),
        capture_output=True,
        text=True,
        env={
            **os.environ,
            "PYTHONPATH": str(tree.resolve()),
            # The other tree is no checkout: it finds the models where this one does.
            "CHUNKSTREAM_MODEL_PATH": str(Path(__file__).resolve().parents[1] / ".cache/models"),
        },
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"chunking in {tree} failed:\n{done.stderr[-3000:]}")
    result: dict[str, list[list[list[Any]]]] = json.loads(done.stdout)
    return result


if __name__ == "__main__":
    print(json.dumps(chunk_all(json.loads(sys.stdin.read()))))
