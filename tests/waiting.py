"""Waiting on a condition in tests that drive real processes: poll, never sleep-and-hope."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def wait_for(predicate: Callable[[], Any], timeout: float, what: str, step: float = 0.2,
             on_timeout: Callable[[], str] | None = None) -> Any:
    """Return predicate()'s first truthy value; fail naming `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(step)
    details = f"\n{on_timeout()}" if on_timeout else ""
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}{details}")
