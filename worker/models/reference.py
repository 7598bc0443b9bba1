"""One reference per model role, resolved once: directory, kind, variant, identity, window.

Invariants:

- A model directory is described here and only here (:func:`describe`): its manifest is
  decoded once (:func:`~worker.models.manifest.read_any_manifest`), or for a model2vec directory
  made elsewhere its ``config.json`` and matrix header are read. Every consumer — the chunkers'
  ``BuildContext``, the loader behind the batcher, chunk ids, the metrics, the CLI — receives
  the :class:`ModelRef` and reads nothing of the directory again to learn who the model is or
  how much text it reads.
- Two roles (docs/concepts/models.md): the *boundary* model places the
  embedding strategies' cuts; the *retrieval* model makes the vectors that go out with
  ``include_embeddings`` and is the model whose tokens size chunks.
- Defaults never depend on the current directory: a role without an explicit directory is
  looked for, by its default name, on :func:`search_path` (the source checkout's
  ``.cache/models`` when the package runs from one, the user's cache ``$XDG_CACHE_HOME/
  chunkstream/models``, the installation's ``share/chunkstream/models``; or the places
  ``CHUNKSTREAM_MODEL_PATH`` names instead). When it is nowhere,
  :class:`~worker.errors.ModelNotBuilt` lists every place looked at and the command that makes
  the model.
"""

from __future__ import annotations

import functools
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from worker.errors import ModelNotBuilt
from worker.models.identity import IdentityError, variant_identity
from worker.models.manifest import (
    DEFAULT_MODEL_NAME,
    DEFAULT_STATIC_NAME,
    INT8_MODEL_NAME,
    MANIFEST_NAME,
    MODEL_NAME,
    TOKENIZER_NAME,
    Manifest,
    ManifestError,
    read_any_manifest,
    sha256_file,
)
from worker.models.static_layout import (
    MATRIX_FILE,
    MATRIX_TENSOR,
    TOKENIZER_FILE,
    is_static_dir,
    static_identity,
    static_max_length,
)
from worker.models.tensorfile import TensorFileError, tensor_shapes

Role = Literal["boundary", "retrieval"]
ModelKind = Literal["onnx", "static"]

# [CLS] and [SEP]: an encoder's max_seq_length counts them, the text gets the rest.
SPECIAL_TOKENS = 2


@dataclass(frozen=True)
class ModelRef:
    """Everything a consumer needs to know about one model, read once from its directory."""

    role: Role
    directory: Path
    kind: ModelKind
    variant: str  # "fp32", "int8" or "static": what is loaded
    identity: str  # 16 hex digits: what chunk-id fingerprints and the model-info metric carry
    dimension: int
    # Tokens the model reads, special tokens included; None when it reads any length (a
    # model2vec directory whose max_length is null).
    max_seq_length: int | None
    tokenizer: Path  # the model's tokenizer.json
    # sha256 of tokenizer.json (from the manifest when it lists it): what sizes in this model's
    # tokens depend on, with the window (a chunker sizing by it puts both into its fingerprint).
    tokenizer_digest: str = ""

    @property
    def sizing_identity(self) -> str:
        """What chunk sizes counted in this model's tokens depend on: tokenizer and window."""
        digest = self.tokenizer_digest or _hashed_once(self.tokenizer.resolve())
        return f"{digest[:16]}/{self.window}"

    @property
    def window(self) -> int | None:
        """Tokens of text (special tokens excluded) the model reads before it truncates."""
        if self.max_seq_length is None:
            return None
        return max(1, self.max_seq_length - SPECIAL_TOKENS)

    @property
    def int8(self) -> bool:
        return self.variant == "int8"

    @property
    def label(self) -> str:
        """``kind:identity``, as chunk events carry it in ``embedding_model``."""
        return f"{self.kind}:{self.identity}"


def describe(directory: Path, role: Role, *, int8: bool = False) -> ModelRef:
    """The reference of the model in ``directory`` (``int8`` picks an ONNX build's int8
    variant). Raises :class:`ManifestError` with a one-line reason naming the directory."""
    manifest = read_any_manifest(directory)
    try:
        if isinstance(manifest, Manifest):
            if int8 and INT8_MODEL_NAME not in manifest.files:
                raise ManifestError(f"{directory} has no {INT8_MODEL_NAME} (rebuild with --int8)")
            variant_file = INT8_MODEL_NAME if int8 else MODEL_NAME
            if not (directory / variant_file).is_file():
                # Listed but not shipped: the image keeps only the int8 variant
                # (docs/operating/deploy.md, "The image").
                raise ManifestError(
                    f"{directory} does not ship {variant_file}; set CHUNKSTREAM_MODEL_INT8="
                    f"{'false' if int8 else 'true'} for the variant it has"
                )
            return ModelRef(
                role=role,
                directory=directory,
                kind="onnx",
                variant="int8" if int8 else "fp32",
                identity=variant_identity(manifest, directory, int8=int8),
                dimension=manifest.dimension,
                max_seq_length=manifest.max_seq_length,
                tokenizer=directory / TOKENIZER_NAME,
                tokenizer_digest=_tokenizer_digest(directory / TOKENIZER_NAME, manifest.files),
            )
        if manifest is not None:  # a static model made here
            return ModelRef(
                role=role,
                directory=directory,
                kind="static",
                variant="static",
                identity=variant_identity(manifest, directory, int8=False),
                dimension=manifest.dimension,
                max_seq_length=manifest.max_seq_length,
                tokenizer=directory / TOKENIZER_FILE,
                tokenizer_digest=_tokenizer_digest(directory / TOKENIZER_FILE, manifest.files),
            )
    except IdentityError as exc:
        raise ManifestError(str(exc)) from None
    if is_static_dir(directory):
        return _foreign_static(directory, role)
    raise ManifestError(
        f"{str(directory)!r} holds no model (no {MANIFEST_NAME}, no {MATRIX_FILE}); "
        "build one with `chunkstream model build` or `chunkstream model distill`"
    )


def _foreign_static(directory: Path, role: Role) -> ModelRef:
    """A model2vec directory made elsewhere (no manifest of ours)."""
    try:
        shape = tensor_shapes(directory / MATRIX_FILE).get(MATRIX_TENSOR)
        max_length = static_max_length(directory)
    except (OSError, TensorFileError) as exc:
        raise ManifestError(f"{directory}: {exc}") from None
    if shape is None or len(shape) != 2:
        raise ManifestError(
            f"{directory / MATRIX_FILE}: {MATRIX_TENSOR!r} has shape {shape}, "
            "expected [vocabulary, dimension]"
        )
    return ModelRef(
        role=role,
        directory=directory,
        kind="static",
        variant="static",
        identity=static_identity(directory)[:16],
        dimension=shape[1],
        # A static model adds no special tokens: its window is max_length itself.
        max_seq_length=None if max_length is None else max_length + SPECIAL_TOKENS,
        tokenizer=directory / TOKENIZER_FILE,
        tokenizer_digest=_tokenizer_digest(directory / TOKENIZER_FILE, {}),
    )


@functools.lru_cache(maxsize=16)
def _hashed_once(path: Path) -> str:
    """A reference built by hand (not by :func:`describe`) carries no digest: hash the file."""
    try:
        return sha256_file(path)
    except OSError as exc:
        raise ManifestError(f"cannot read {path}: {exc.strerror or exc}") from None


def _tokenizer_digest(path: Path, files: dict[str, str]) -> str:
    """The tokenizer's sha256: as the manifest lists it, else hashed (a foreign directory)."""
    listed = files.get(path.name)
    if listed:
        return listed
    try:
        return sha256_file(path)
    except OSError as exc:
        raise ManifestError(f"cannot read {path}: {exc.strerror or exc}") from None


# Replaces the search path when set: directories separated by the OS path separator (":").
SEARCH_PATH_ENV = "CHUNKSTREAM_MODEL_PATH"


def search_path() -> list[Path]:
    """Where default models are looked for, in order (module docstring), unless
    ``CHUNKSTREAM_MODEL_PATH`` names the places itself."""
    named = os.environ.get(SEARCH_PATH_ENV)
    if named:
        return [Path(p) for p in named.split(os.pathsep) if p]
    roots: list[Path] = []
    checkout = Path(__file__).resolve().parents[2]
    if (checkout / "pyproject.toml").is_file() and (checkout / "worker").is_dir():
        roots.append(checkout / ".cache" / "models")
    cache_home = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    roots.append(Path(cache_home) / "chunkstream" / "models")
    roots.append(Path(sys.prefix) / "share" / "chunkstream" / "models")
    return roots


def default_name(role: Role) -> str:
    return DEFAULT_STATIC_NAME if role == "boundary" else DEFAULT_MODEL_NAME


def default_location(role: Role) -> Path:
    """Where `chunkstream model build`/`distill` put a role's default model unless told: the
    first place :func:`search_path` looks."""
    return search_path()[0] / default_name(role)


def _holds_model(directory: Path) -> bool:
    return (directory / MANIFEST_NAME).is_file() or is_static_dir(directory)


def _make_command(role: Role) -> str:
    if role == "boundary":
        return "`chunkstream model build` then `chunkstream model distill`"
    return "`chunkstream model build`"


def find(role: Role, explicit: str | Path | None, *, int8: bool = False) -> ModelRef:
    """The model of ``role``: ``explicit`` when given, else its default found on the search
    path. Raises :class:`ModelNotBuilt` naming where it looked (or what is wrong there)."""
    if explicit is not None:
        directory = Path(explicit)
        if not directory.is_dir() or not any(directory.iterdir()):
            how = f"`chunkstream model build --out {directory}`"
            if role == "boundary":
                how += f" (a transformer) or `chunkstream model distill --out {directory}` (static)"
            raise ModelNotBuilt(f"no {role} model in {directory}; build it with {how}")
        try:
            return describe(directory, role, int8=int8)
        except ManifestError as exc:
            raise ModelNotBuilt(str(exc)) from None
    looked = []
    for root in search_path():
        directory = root / default_name(role)
        if _holds_model(directory):
            try:
                return describe(directory, role, int8=int8)
            except ManifestError as exc:
                raise ModelNotBuilt(str(exc)) from None
        looked.append(str(directory))
    raise ModelNotBuilt(
        f"no {role} model found (looked in {', '.join(looked)}); make it with "
        f"{_make_command(role)}, or name a directory with CHUNKSTREAM_"
        f"{'MODEL_DIR' if role == 'boundary' else 'RETRIEVAL_MODEL_DIR'}"
    )


def find_retrieval(
    retrieval_dir: str | Path | None, boundary_dir: str | Path | None, *, int8: bool = False
) -> ModelRef:
    """The retrieval model: ``retrieval_dir`` when given; else the boundary model's directory
    when that names an ONNX build (one transformer serving both roles); else the default
    transformer on the search path. A static boundary model is never taken for retrieval
    vectors unless named as such: its vectors place cuts well and retrieve poorly
    (docs/concepts/models.md)."""
    if retrieval_dir is not None:
        return find("retrieval", retrieval_dir, int8=int8)
    if boundary_dir is not None and isinstance(read_any_manifest(Path(boundary_dir)), Manifest):
        return find("retrieval", boundary_dir, int8=int8)
    return find("retrieval", None, int8=int8)
