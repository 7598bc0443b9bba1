"""chunkstream: a streaming document-chunking worker for RAG ingestion pipelines."""

from worker._version import __version__

__all__ = ["__version__"]
