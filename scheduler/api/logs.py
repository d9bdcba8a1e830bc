"""Pod log windows for the API and the console's log tail: the last lines, then what follows.

A client asks once for the tail (no offset) and gets the last N lines plus the byte offset they
end at; it then asks with that offset and gets only what was appended since. Both reads go
through scheduler.node.logs.read_pod_log: the file on this machine (local executor), or the
pod's node asked over the Celery control channel (Celery executor), read with
scheduler.node.runtime.logs.read_from, which never splits a UTF-8 character and starts over when a log
was truncated. A node that does not answer raises LogUnavailable.
"""

from __future__ import annotations

from dataclasses import dataclass

from scheduler.models import Pod
from scheduler.node.logs import LogUnavailable, read_pod_log

__all__ = ["LogUnavailable", "LogWindow", "follow_window", "tail_window"]

TAIL_WINDOW_BYTES = 256 * 1024  # enough for 200 long lines; a tail never reads more than this
FOLLOW_MAX_BYTES = 256 * 1024  # per request; a client far behind catches up over a few requests
MAX_LINES = 5000
MAX_LINE_CHARS = 16 * 1024  # a longer line in a tail shows its last part
CUT_MARKER = "[tidepool: long line cut, its start is not shown] "


@dataclass(frozen=True)
class LogWindow:
    text: str
    offset: int  # pass back as `offset` to get what follows
    reset: bool  # the log was truncated or replaced: the client should clear what it shows


def tail_window(pod: Pod, lines: int) -> LogWindow:
    """The last `lines` lines (each as a terminal would show a line with carriage returns).

    A line longer than MAX_LINE_CHARS — or one that began before the window, such as a 100 MB line
    without a newline — shows its last MAX_LINE_CHARS characters after CUT_MARKER, rather than nothing.
    """
    lines = max(1, min(lines, MAX_LINES))
    chunk = read_pod_log(pod, -TAIL_WINDOW_BYTES, TAIL_WINDOW_BYTES)
    if not chunk.exists:
        return LogWindow(text="", offset=0, reset=True)
    parts = chunk.text.split("\n")
    trailing_newline = bool(parts) and parts[-1] == ""
    if trailing_newline:
        parts.pop()
    # The window's first piece began before it: shown, marked as cut, only when the lines wanted reach it.
    first_is_cut = chunk.start > 0 and len(parts) <= lines
    shown = [_as_displayed(line, cut=first_is_cut and index == 0) for index, line in enumerate(parts[-lines:])]
    body = "\n".join(shown) + ("\n" if trailing_newline and shown else "")
    return LogWindow(text=body, offset=chunk.offset, reset=True)


def follow_window(pod: Pod, offset: int) -> LogWindow:
    """What was appended since `offset`; from the start again if the log became shorter than that."""
    offset = max(0, offset)
    chunk = read_pod_log(pod, offset, FOLLOW_MAX_BYTES)
    if not chunk.exists:  # not created yet: nothing to show, keep the offset
        return LogWindow(text="", offset=offset, reset=False)
    return LogWindow(text=chunk.text, offset=chunk.offset, reset=chunk.start < offset)


def _as_displayed(line: str, *, cut: bool = False) -> str:
    """The line as a terminal shows it (after its last carriage return), its last MAX_LINE_CHARS characters
    after CUT_MARKER when it is longer or `cut` (its start lies before what was read)."""
    line = line.rstrip("\r")
    line = line[line.rfind("\r") + 1 :]
    if cut or len(line) > MAX_LINE_CHARS:
        return CUT_MARKER + line[-MAX_LINE_CHARS:]
    return line
