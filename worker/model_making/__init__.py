"""The offline model-making room: ``chunkstream model build`` (safetensors → ONNX, no torch),
``chunkstream model distill`` (a static boundary model from the ONNX encoder, on a pinned
training corpus) and what they need. It imports the run-time model room (:mod:`worker.models`,
the contract at the bottom), never the reverse; only the CLI reaches it (import-rule test).
Most of it needs the ``model`` extra (onnx, safetensors, the weights' package)."""
