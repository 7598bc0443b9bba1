"""bench/support/process_cpu.py: another process's CPU over a span, from samples of /proc."""

from __future__ import annotations

import os

import pytest

from bench.support.process_cpu import _TICKS_PER_S, CpuSampler, process_ticks


def test_the_span_is_interpolated_between_samples() -> None:
    sampler = CpuSampler(os.getpid())
    sampler.times = [10.0, 11.0, 12.0]
    sampler.ticks = [100, 200, 260]
    # 10.5 → 150 ticks, 11.5 → 230 ticks: 80 ticks between them.
    assert sampler.cpu_between(10.5, 11.5) == pytest.approx(80 / _TICKS_PER_S)
    assert sampler.cpu_between(10.0, 12.0) == pytest.approx(160 / _TICKS_PER_S)
    with pytest.raises(ValueError, match="outside"):
        sampler.cpu_between(9.0, 11.0)
    with pytest.raises(ValueError, match="outside"):
        sampler.cpu_between(11.0, 12.5)


def test_it_reads_this_process_and_samples_while_open() -> None:
    before = process_ticks(os.getpid())
    with CpuSampler(os.getpid(), interval_s=0.001) as sampler:
        spent = 0
        while process_ticks(os.getpid()) < before + 3:  # burn three ticks of CPU
            spent += sum(range(10_000))
    assert len(sampler.times) >= 3
    assert sampler.times == sorted(sampler.times)
    assert sampler.ticks == sorted(sampler.ticks)
    assert sampler.ticks[-1] >= before + 3
    assert sampler.cpu_between(sampler.times[0], sampler.times[-1]) >= 3 / _TICKS_PER_S
