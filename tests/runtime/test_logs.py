"""Pod logs: tail from the end of big files, follow by offset without splitting characters."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from scheduler.node.runtime import logs
from scheduler.node.runtime.logs import read_from, tail


def test_tail_of_a_missing_file_is_empty(tmp_path: Path) -> None:
    assert tail(str(tmp_path / "missing.log")) == []
    assert tail(str(tmp_path / "missing.log"), lines=0) == []


@pytest.mark.parametrize(
    ("content", "lines", "expected"),
    [
        ("a\nb\nc\n", 2, ["b", "c"]),
        ("a\nb\nc", 2, ["b", "c"]),  # no line end at the end
        ("a\nb\nc\n", 10, ["a", "b", "c"]),
        ("a\n\nb\n", 2, ["", "b"]),  # empty lines count
        ("", 5, []),
        ("a\nb\n", 0, []),
        ("epoch 1: 10%\repoch 1: 50%\repoch 1: 100%\nwindows\r\n", 5, ["epoch 1: 100%", "windows"]),
    ],
)
def test_tail(tmp_path: Path, content: str, lines: int, expected: list[str]) -> None:
    path = tmp_path / "pod.log"
    path.write_bytes(content.encode())
    assert tail(str(path), lines) == expected


def test_tail_of_a_big_file_reads_only_its_end(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "big.log"
    with open(path, "w") as f:
        for i in range(300_000):
            f.write(f"line {i} " + "x" * 50 + "\n")
    assert path.stat().st_size > 15_000_000
    read = []

    class CountingFile(io.FileIO):
        def read(self, size: int = -1) -> bytes:
            data = super().read(size)
            read.append(len(data))
            return data

    monkeypatch.setattr(logs, "open", lambda p, mode: CountingFile(p, "r"), raising=False)

    result = tail(str(path), lines=200)

    assert result == [f"line {i} " + "x" * 50 for i in range(299_800, 300_000)]
    assert sum(read) <= 2 * 64 * 1024


def test_tail_keeps_characters_whole_across_blocks(tmp_path: Path) -> None:
    # A line of 2-byte characters longer than the read block, at an odd offset.
    long_line = "é" * 70_001
    path = tmp_path / "utf8.log"
    path.write_text("x\n" + long_line + "\nlast\n", encoding="utf-8")
    assert tail(str(path), 2) == [long_line, "last"]


def test_read_from_follows_appends(tmp_path: Path) -> None:
    path = tmp_path / "pod.log"
    assert read_from(str(path), 0) == ("", 0)  # not created yet

    path.write_bytes(b"first\n")
    text, offset = read_from(str(path), 0)
    assert (text, offset) == ("first\n", 6)
    assert read_from(str(path), offset) == ("", 6)

    with open(path, "ab") as f:
        f.write(b"second\nthi")
    assert read_from(str(path), offset) == ("second\nthi", 16)


def test_read_from_never_splits_a_character(tmp_path: Path) -> None:
    path = tmp_path / "pod.log"
    path.write_bytes(b"caf\xc3")  # "café" with its last byte not written yet
    text, offset = read_from(str(path), 0)
    assert (text, offset) == ("caf", 3)

    with open(path, "ab") as f:
        f.write(b"\xa9 \xe2\x82\xac")  # "é €"
    assert read_from(str(path), offset) == ("é €", 9)


def test_read_from_limits_each_read(tmp_path: Path) -> None:
    path = tmp_path / "pod.log"
    path.write_text("€" * 10, encoding="utf-8")  # 3 bytes each
    text, offset = read_from(str(path), 0, max_bytes=8)
    assert (text, offset) == ("€€", 6)
    assert read_from(str(path), offset, max_bytes=100) == ("€" * 8, 30)


def test_read_from_starts_over_after_truncation(tmp_path: Path) -> None:
    path = tmp_path / "pod.log"
    path.write_text("a long first version\n")
    _, offset = read_from(str(path), 0)
    path.write_text("new\n")
    assert read_from(str(path), offset) == ("new\n", 4)


def test_invalid_bytes_are_replaced_not_raised(tmp_path: Path) -> None:
    path = tmp_path / "pod.log"
    path.write_bytes(b"ok \xff\xfe bytes\n")
    assert tail(str(path)) == ["ok \ufffd\ufffd bytes"]
    assert read_from(str(path), 0)[0] == "ok \ufffd\ufffd bytes\n"
