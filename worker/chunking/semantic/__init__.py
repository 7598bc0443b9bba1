"""The embedding strategies (``semantic``, ``sdpm``, ``context``) and the helpers only they use.

Each is split in two pure halves around the model: ``plan(text)`` says which texts need vectors,
``assemble(plan, vectors)`` turns the vectors into chunks. The embedding itself happens outside,
in the caller's micro-batcher, so nothing here imports onnxruntime.
"""
