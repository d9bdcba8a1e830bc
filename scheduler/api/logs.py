"""Pod log windows for the API and the console's log tail: the last lines, then what follows.

A client asks once for the tail (no offset) and gets the last N lines plus the byte offset they
end at; it then asks with that offset and gets only what was appended since. Both reads go
through scheduler.runtime.logs.read_from, which never splits a UTF-8 character and starts over
when a log was truncated.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from scheduler.runtime.logs import read_from

TAIL_WINDOW_BYTES = 256 * 1024  # enough for 200 long lines; a tail never reads more than this
FOLLOW_MAX_BYTES = 256 * 1024  # per request; a client far behind catches up over a few requests
MAX_LINES = 5000


@dataclass(frozen=True)
class LogWindow:
    text: str
    offset: int  # pass back as `offset` to get what follows
    reset: bool  # the log was truncated or replaced: the client should clear what it shows


def tail_window(path: str, lines: int) -> LogWindow:
    """The last `lines` lines (each as a terminal would show a line with carriage returns)."""
    lines = max(1, min(lines, MAX_LINES))
    try:
        size = os.path.getsize(path)
    except OSError:
        return LogWindow(text="", offset=0, reset=True)
    start = max(0, size - TAIL_WINDOW_BYTES)
    text, end = read_from(path, start, max_bytes=size - start)
    parts = text.split("\n")
    if start > 0 and parts:
        parts = parts[1:]  # the window began inside a line
    trailing_newline = bool(parts) and parts[-1] == ""
    if trailing_newline:
        parts.pop()
    shown = [_as_displayed(line) for line in parts[-lines:]]
    body = "\n".join(shown) + ("\n" if trailing_newline and shown else "")
    return LogWindow(text=body, offset=end, reset=True)


def follow_window(path: str, offset: int) -> LogWindow:
    """What was appended since `offset`; from the start again if the log became shorter than that."""
    try:
        size = os.path.getsize(path)
    except OSError:  # not created yet: nothing to show, keep the offset
        return LogWindow(text="", offset=offset, reset=False)
    reset = offset > size
    text, end = read_from(path, 0 if reset else max(0, offset), max_bytes=FOLLOW_MAX_BYTES)
    return LogWindow(text=text, offset=end, reset=reset)


def _as_displayed(line: str) -> str:
    line = line.rstrip("\r")
    return line[line.rfind("\r") + 1 :]
