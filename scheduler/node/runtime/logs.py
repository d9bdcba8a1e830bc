"""Reading pod logs: the last lines of a file, and following it by byte offset.

Logs are bytes written by arbitrary programs: they are decoded as UTF-8 with replacement, never
raising. Both functions read only what they return (plus one block), so a log of many
gigabytes costs no more than a small one.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

_BLOCK = 64 * 1024
NODE_MAX_BYTES = 64 * 1024  # the most a node sends per control-channel answer


def tail(path: str, lines: int = 200) -> list[str]:
    """The last `lines` lines of the file (without line ends); [] if it does not exist.

    A line holding carriage returns (a progress bar redrawing itself) is shown as a terminal
    would show it: only the text after the last carriage return.
    """
    if lines <= 0:
        return []
    try:
        f = open(path, "rb")
    except OSError:
        return []
    with f:
        pos = f.seek(0, os.SEEK_END)
        chunks: list[bytes] = []
        newlines = 0
        # One newline more than the lines wanted: the text before the first newline read may be
        # the end of a longer line.
        while pos > 0 and newlines <= lines:
            size = min(_BLOCK, pos)
            pos -= size
            f.seek(pos)
            chunk = f.read(size)
            chunks.append(chunk)
            newlines += chunk.count(b"\n")
    text = b"".join(reversed(chunks)).decode("utf-8", errors="replace")
    result = text.split("\n")
    if result and result[-1] == "":  # the file ends with a line end
        result.pop()
    return [_as_displayed(line) for line in result[-lines:]]


def read_from(path: str, offset: int, max_bytes: int = 1024 * 1024) -> tuple[str, int]:
    """Text appended since `offset`, and the offset to pass next time.

    Returns at most `max_bytes` bytes' worth, never splitting a UTF-8 character. If the file
    is now shorter than `offset` (truncated or replaced), it is read again from the start; a
    file that does not exist yet reads as no text.
    """
    try:
        f = open(path, "rb")
    except OSError:
        return "", offset
    with f:
        if offset > os.fstat(f.fileno()).st_size:
            offset = 0
        f.seek(offset)
        data = f.read(max_bytes)
    end = _complete_utf8_end(data)
    return data[:end].decode("utf-8", errors="replace"), offset + end


def _as_displayed(line: str) -> str:
    line = line.rstrip("\r")
    return line[line.rfind("\r") + 1 :]


def _complete_utf8_end(data: bytes) -> int:
    """Length of `data` without a multi-byte character cut off at its end."""
    # Look back at most 3 bytes for the lead byte of the last character.
    for back in range(1, min(4, len(data)) + 1):
        byte = data[-back]
        if byte & 0xC0 != 0x80:  # not a continuation byte: ASCII or a lead byte
            if byte >= 0xF0:
                needed = 4
            elif byte >= 0xE0:
                needed = 3
            elif byte >= 0xC0:
                needed = 2
            else:
                needed = 1
            return len(data) - back if back < needed else len(data)
    return len(data)  # only continuation bytes: invalid anyway, let the decoder replace them


@dataclass(frozen=True)
class LogChunk:
    text: str
    start: int  # byte offset the text begins at (0 after a truncated log was read from the start)
    offset: int  # byte offset it ends at: pass it back to read what follows
    size: int  # the log's size when it was read (0 if it does not exist yet)
    exists: bool = True


def read_chunk(path: str, offset: int, max_bytes: int) -> LogChunk:
    """Up to `max_bytes` bytes of the file at `path` from `offset` (see the module's docstring)."""
    try:
        size = os.path.getsize(path)
    except OSError:  # not created yet: nothing to show, keep the offset
        return LogChunk(text="", start=max(0, offset), offset=max(0, offset), size=0, exists=False)
    if offset < 0:
        start = max(0, size + offset)
    elif offset > size:
        start = 0
    else:
        start = offset
    text, end = read_from(path, start, max(0, max_bytes))
    if end < start:  # truncated between the size and the read: read_from started over
        start = 0
    return LogChunk(text=text, start=start, offset=end, size=max(size, end))
