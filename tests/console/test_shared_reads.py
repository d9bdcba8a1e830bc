"""SharedReads: sockets of one user share a re-read in flight, never one older than their notice.

Reads run on one worker thread here, as they do on a live worker's database thread (channels runs
every database_sync_to_async call of a process on one thread), so a read can wait in its queue.
"""

from __future__ import annotations

import asyncio
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from console.consumers import SharedReads


@pytest.fixture
def reads():
    pool = ThreadPoolExecutor(max_workers=1)

    async def on_one_thread(read):
        return await asyncio.get_running_loop().run_in_executor(pool, read)

    yield SharedReads(run_sync=on_one_thread)
    pool.shutdown(wait=True)


async def test_concurrent_identical_reads_run_once(reads: SharedReads) -> None:
    calls = []

    def compute():
        calls.append(1)
        time.sleep(0.05)
        return len(calls)

    noticed = time.monotonic()
    results = await asyncio.gather(*(reads.read("k", noticed, compute) for _ in range(50)))
    assert results == [1] * 50 and len(calls) == 1
    assert await reads.read("k", time.monotonic(), compute) == 2  # nothing is kept once done


async def test_a_read_started_before_the_notice_is_not_joined(reads: SharedReads) -> None:
    started = threading.Event()

    def slow():
        started.set()
        time.sleep(0.1)
        return "old"

    first = asyncio.create_task(reads.read("k", 0.0, slow))
    await asyncio.get_running_loop().run_in_executor(None, started.wait)
    # This socket's notice came after the read in flight began: it must read again.
    assert await reads.read("k", time.monotonic(), lambda: "new") == "new"
    assert await first == "old"


async def test_a_read_still_queued_is_joined_by_a_later_notice(reads: SharedReads) -> None:
    """A read waiting behind others on the database thread begins after every notice that arrives
    meanwhile, so those sockets share it instead of queueing one read each."""
    busy, release = threading.Event(), threading.Event()
    calls = []

    def blocker():
        busy.set()
        release.wait(5)

    def page():
        calls.append(time.monotonic())
        return "page"

    occupying = asyncio.create_task(reads.read("other", 0.0, blocker))
    await asyncio.get_running_loop().run_in_executor(None, busy.wait)
    queued = asyncio.create_task(reads.read("k", time.monotonic(), page))
    await asyncio.sleep(0.01)
    later_notice = time.monotonic()  # after the queued read was asked for, before it began
    joined = asyncio.create_task(reads.read("k", later_notice, page))
    await asyncio.sleep(0.01)
    release.set()
    assert await queued == "page" and await joined == "page"
    assert len(calls) == 1 and calls[0] >= later_notice
    await occupying


async def test_an_error_reaches_every_joiner_and_is_not_kept(reads: SharedReads) -> None:
    def broken():
        time.sleep(0.02)
        raise RuntimeError("db down")

    noticed = time.monotonic()
    results = await asyncio.gather(*(reads.read("k", noticed, broken) for _ in range(3)), return_exceptions=True)
    assert all(isinstance(r, RuntimeError) for r in results)
    assert await reads.read("k", time.monotonic(), lambda: "ok") == "ok"
    with pytest.raises(RuntimeError):
        await reads.read("k2", 0.0, broken)


async def test_sockets_told_of_different_jobs_share_one_queued_read(reads: SharedReads) -> None:
    """Two sockets of one page gathered different notices (one heard the scheduler's too): while the
    read waits on the database thread it takes both sets of ids, and runs once."""
    busy, release = threading.Event(), threading.Event()
    calls: list[frozenset[int]] = []

    def blocker():
        busy.set()
        release.wait(5)

    def rows(ids: frozenset[int]) -> frozenset[int]:
        calls.append(ids)
        return ids

    occupying = asyncio.create_task(reads.read("other", 0.0, blocker))
    await asyncio.get_running_loop().run_in_executor(None, busy.wait)
    first = asyncio.create_task(reads.read_changes("page", time.monotonic(), frozenset({1}), rows))
    await asyncio.sleep(0.01)
    second = asyncio.create_task(reads.read_changes("page", time.monotonic(), frozenset({1, 2}), rows))
    await asyncio.sleep(0.01)
    release.set()
    assert await first == frozenset({1, 2}) and await second == frozenset({1, 2})
    assert calls == [frozenset({1, 2})]
    await occupying


async def test_a_begun_read_is_joined_only_for_the_ids_it_reads(reads: SharedReads) -> None:
    started, release = threading.Event(), threading.Event()
    calls: list[frozenset[int]] = []

    def rows(ids: frozenset[int]) -> frozenset[int]:
        calls.append(ids)
        if len(calls) == 1:
            started.set()
            release.wait(5)
        return ids

    noticed = time.monotonic()
    first = asyncio.create_task(reads.read_changes("page", noticed, frozenset({1}), rows))
    await asyncio.get_running_loop().run_in_executor(None, started.wait)
    # Told of job 1 before the read began: it joins. Told of job 2 too: the begun read lacks it, so a
    # read of its own follows.
    same = asyncio.create_task(reads.read_changes("page", noticed, frozenset({1}), rows))
    more = asyncio.create_task(reads.read_changes("page", noticed, frozenset({1, 2}), rows))
    await asyncio.sleep(0.01)
    release.set()
    assert await first == frozenset({1}) and await same == frozenset({1})
    assert await more == frozenset({1, 2})
    assert calls == [frozenset({1}), frozenset({1, 2})]


async def test_a_begun_read_is_not_joined_after_a_later_notice(reads: SharedReads) -> None:
    started, release = threading.Event(), threading.Event()

    def rows(ids: frozenset[int]) -> str:
        if not started.is_set():
            started.set()
            release.wait(5)
            return "old"
        return "new"

    first = asyncio.create_task(reads.read_changes("page", 0.0, frozenset({1}), rows))
    await asyncio.get_running_loop().run_in_executor(None, started.wait)
    later = asyncio.create_task(reads.read_changes("page", time.monotonic(), frozenset({1}), rows))
    await asyncio.sleep(0.01)
    release.set()
    assert await first == "old" and await later == "new"
