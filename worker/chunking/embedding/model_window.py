"""How much text the embedding model sees at once, and cutting longer text into windows.

An encoder truncates its input at ``max_seq_length`` tokens, so a sentence longer than that
would be judged on its first part only. Boundary decisions must see the whole text: a unit that
does not fit is cut at word boundaries into windows that do, each window is embedded, and the
unit's vector is the length-weighted mean of its windows (see :mod:`.units`).

The window is measured with the model's own ``tokenizer.json`` when the model directory is known,
and otherwise in characters. Both rely on one property of the BERT-family WordPiece tokenizers the
engine builds: a token never covers less than one character, so a text of ``n`` characters has
at most ``n`` tokens. That makes the character fallback safe (if pessimistic), and lets the
tokenizer path skip counting every text no longer than the window itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import msgspec

from worker.chunking.text.segment import split_to_cap
from worker.chunking.text.tokens import CharacterCounter, TokenCounter, make_counter
from worker.chunking.types import Span
from worker.embedding.manifest import DEFAULT_MODEL_DIR, MANIFEST_NAME, TOKENIZER_NAME

# [CLS] and [SEP] take two places of the model's window.
SPECIAL_TOKENS = 2
# all-MiniLM-L6-v2's window, used when no model directory is known.
FALLBACK_MAX_SEQ_LENGTH = 256


class _ManifestWindow(msgspec.Struct):
    """The one manifest field this module needs (the rest is the embedding engine's)."""

    max_seq_length: int


@dataclass(frozen=True)
class ModelWindow:
    """Texts of at most ``cap`` units of ``counter`` fit the model without truncation."""

    counter: TokenCounter
    cap: int
    model_dir: str | None = None

    def pieces(self, text: str, span: Span) -> list[Span]:
        """``span`` as is when it fits the model, else cut at words into pieces that do."""
        # At most one token per character (module docstring): short texts need no count.
        if span.end - span.start <= self.cap:
            return [span]
        return split_to_cap(text, span, self.counter, self.cap)


def character_window(max_seq_length: int = FALLBACK_MAX_SEQ_LENGTH) -> ModelWindow:
    """A window in characters: safe for any WordPiece model of that ``max_seq_length``."""
    return ModelWindow(CharacterCounter(), max(1, max_seq_length - SPECIAL_TOKENS))


def load_model_window(model_dir: str | Path | None) -> ModelWindow:
    """The window of the model in ``model_dir`` (or the default build when it exists).

    Reads ``manifest.json`` for ``max_seq_length`` and counts with the directory's
    ``tokenizer.json`` (a model2vec directory without our manifest: its ``config.json``
    ``max_length``). Without a usable directory the character window is returned, so a
    library caller with its own embedder needs no model files. Raises ``ValueError`` when an
    explicitly named directory is not a built model.
    """
    explicit = model_dir is not None
    directory = Path(model_dir) if model_dir is not None else DEFAULT_MODEL_DIR
    manifest_path = directory / MANIFEST_NAME
    tokenizer_path = directory / TOKENIZER_NAME
    if not manifest_path.is_file() and (directory / "model.safetensors").is_file():
        return _static_window(directory)
    if not (manifest_path.is_file() and tokenizer_path.is_file()):
        if explicit:
            raise ValueError(
                f"{directory} is not a built model directory (run `chunkstream model build`)"
            )
        return character_window()
    try:
        manifest = msgspec.json.decode(manifest_path.read_bytes(), type=_ManifestWindow)
    except msgspec.DecodeError as exc:
        raise ValueError(f"{manifest_path}: {exc}") from exc
    cap = max(1, manifest.max_seq_length - SPECIAL_TOKENS)
    return ModelWindow(make_counter(str(tokenizer_path)), cap, str(directory))


def _static_window(directory: Path) -> ModelWindow:
    """A model2vec directory without our manifest: its ``max_length`` (model2vec's default 512;
    null means the whole text is read, so no window cuts it)."""
    try:
        config = msgspec.json.decode((directory / "config.json").read_bytes())
    except (OSError, msgspec.DecodeError) as exc:
        raise ValueError(f"{directory / 'config.json'}: {exc}") from exc
    max_length = config.get("max_length", 512) if isinstance(config, dict) else 512
    cap = max_length if isinstance(max_length, int) and max_length > 0 else 1 << 40
    return ModelWindow(make_counter(str(directory / "tokenizer.json")), cap, str(directory))
