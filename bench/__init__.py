"""The benchmarks a user runs, each a module run from the repository root:
``.venv/bin/python -m bench.NAME`` (bench/README.md lists them and what each prints).

Their shared parts are in :mod:`bench.support`; the calibration scripts in
:mod:`bench.calibration`. The corpora and brokers the tests use too live in ``tests.support``.
"""
