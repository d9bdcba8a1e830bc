"""Reading a pod's progress file: complete reports parse, anything else is None."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scheduler.node.runtime.progress import Progress, read_progress

FULL = {
    "step": 1250,
    "last_checkpoint_step": 1200,
    "last_checkpoint_at": 1730000000.5,
    "resumed_from_step": 1000,
    "updated_at": 1730000012,
}


def test_reads_a_full_report(tmp_path: Path) -> None:
    path = tmp_path / "progress.json"
    path.write_text(json.dumps(FULL))
    progress = read_progress(str(path))
    assert progress == Progress(1250, 1200, 1730000000.5, 1000, 1730000012.0)
    assert progress.steps_since_checkpoint == 50


def test_unknown_fields_are_ignored_and_missing_ones_are_none(tmp_path: Path) -> None:
    path = tmp_path / "progress.json"
    path.write_text(json.dumps({"step": 7, "loss": 0.25, "last_checkpoint_step": None}))
    progress = read_progress(str(path))
    assert progress == Progress(7, None, None, None, None)
    assert progress.steps_since_checkpoint == 7


@pytest.mark.parametrize(
    "content",
    [
        b"",
        json.dumps(FULL).encode()[:-10],  # cut off mid-write
        b"[1, 2]",
        b'{"last_checkpoint_step": 3}',  # no step
        b'{"step": -1}',
        b'{"step": true}',
        b'{"step": "12"}',
        b"\xff\xfe",
        b'{"step": 1, "pad": "' + b"x" * 70_000 + b'"}',  # not a progress file
    ],
    ids=["empty", "partial", "list", "no-step", "negative", "bool", "string", "binary", "huge"],
)
def test_malformed_reports_read_as_none(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "progress.json"
    path.write_bytes(content)
    assert read_progress(str(path)) is None


def test_missing_file_reads_as_none(tmp_path: Path) -> None:
    assert read_progress(str(tmp_path / "nope.json")) is None
    assert read_progress(str(tmp_path)) is None  # a directory


def test_bad_optional_fields_read_as_none(tmp_path: Path) -> None:
    path = tmp_path / "progress.json"
    path.write_text('{"step": 5, "last_checkpoint_step": "x", "updated_at": NaN, "last_checkpoint_at": true}')
    assert read_progress(str(path)) == Progress(5, None, None, None, None)
