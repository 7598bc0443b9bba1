"""Hypothesis profiles for the fuzz tests (only these tests; the rest of the suite keeps its
own settings). CI runs the bounded `ci` profile; a longer run on demand:

    CHUNKSTREAM_FUZZ_PROFILE=long .venv/bin/pytest tests/fuzz
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

settings.register_profile(
    "chunkstream-fuzz-ci",
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile(
    "chunkstream-fuzz-long",
    max_examples=5000,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
PROFILE = os.environ.get("CHUNKSTREAM_FUZZ_PROFILE", "ci")
if PROFILE not in ("ci", "long"):
    raise ValueError(f"CHUNKSTREAM_FUZZ_PROFILE must be `ci` or `long`, not {PROFILE!r}")
FUZZ = settings.get_profile(f"chunkstream-fuzz-{PROFILE}")
