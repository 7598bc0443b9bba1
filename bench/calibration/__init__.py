"""Calibration scripts: they measure the constants the worker's estimates and bounds use
(the backlog estimate's drain time, the embedding strategies' memory per byte), each a module
run from the repository root: ``.venv/bin/python -m bench.calibration.NAME``.
"""
