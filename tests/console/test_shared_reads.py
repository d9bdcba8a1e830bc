"""SharedReads: sockets of one user share a re-read in flight, never one older than their notice."""

from __future__ import annotations

import asyncio
import time

import pytest

from console.consumers import SharedReads


async def test_concurrent_identical_reads_run_once() -> None:
    reads = SharedReads()
    calls = []

    async def compute():
        calls.append(1)
        await asyncio.sleep(0.05)
        return len(calls)

    noticed = time.monotonic()
    results = await asyncio.gather(*(reads.read("k", noticed, compute) for _ in range(50)))
    assert results == [1] * 50 and len(calls) == 1
    assert await reads.read("k", time.monotonic(), compute) == 2  # nothing is kept once done


async def test_a_read_started_before_the_notice_is_not_joined() -> None:
    reads = SharedReads()
    started = asyncio.Event()

    async def slow():
        started.set()
        await asyncio.sleep(0.1)
        return "old"

    async def fresh():
        return "new"

    first = asyncio.create_task(reads.read("k", 0.0, slow))
    await started.wait()
    # This socket's notice came after the read in flight began: it must read again.
    assert await reads.read("k", time.monotonic(), fresh) == "new"
    assert await first == "old"


async def test_an_error_reaches_every_joiner_and_is_not_kept() -> None:
    reads = SharedReads()

    async def broken():
        await asyncio.sleep(0.02)
        raise RuntimeError("db down")

    noticed = time.monotonic()
    results = await asyncio.gather(*(reads.read("k", noticed, broken) for _ in range(3)), return_exceptions=True)
    assert all(isinstance(r, RuntimeError) for r in results)

    async def ok():
        return "ok"

    assert await reads.read("k", time.monotonic(), ok) == "ok"
    with pytest.raises(RuntimeError):
        await reads.read("k2", 0.0, broken)
