"""Embeddings: the ONNX model build (safetensors → ONNX, no torch) and the embedder."""
