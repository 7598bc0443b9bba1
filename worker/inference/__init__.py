"""Inference in the worker: the token-budget batch policy (pure), the one shared micro-batcher
that drives it with inference on threads, and serving: each model role resolved once, loaded off
the event loop, metered, behind a batcher.
"""
