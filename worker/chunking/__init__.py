"""Chunking: pure code that turns a document's text into offset-exact chunks."""

from worker.chunking.types import Chunk, Span

__all__ = ["Chunk", "Span"]
