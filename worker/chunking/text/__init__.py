"""Text analysis shared by the strategies: sentences, words, markdown blocks, density, word
lists and token units. Pure functions over a document's text; imports nothing else of
``worker.chunking`` but ``types``."""
