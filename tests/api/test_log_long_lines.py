"""A log line longer than the tail's window shows its last part after a marker (issue 25: a 100 MB
line without a newline showed 0 characters), and a long line inside the window is cut the same way;
ordinary logs read as before."""

from __future__ import annotations

import pytest
from django.test import Client

from scheduler.api.logs import CUT_MARKER, MAX_LINE_CHARS, TAIL_WINDOW_BYTES, tail_window
from scheduler.paths import pod_log_path
from tests.factories import JobFactory, World, make_running

pytestmark = pytest.mark.django_db


@pytest.fixture
def pod(world: World):
    job = JobFactory(workspace=world.vision, quota=world.team_vision, owner=world.alice)
    pod = make_running(job, world.gpu1)[0]
    pod_log_path(pod).parent.mkdir(parents=True, exist_ok=True)
    return pod


def write_log(pod, data: bytes) -> None:
    pod_log_path(pod).write_bytes(data)


def test_a_line_longer_than_the_window_shows_its_tail(pod, alice_client: Client) -> None:
    line = b"step " * (3 * 1024 * 1024 // 5) + "loss 0.25 ✓".encode()  # 3 MiB, no newline, ≫ the window
    assert len(line) > 10 * TAIL_WINDOW_BYTES
    write_log(pod, line)
    window = tail_window(pod, 200)
    assert window.text.startswith(CUT_MARKER) and window.text.endswith("loss 0.25 ✓")
    assert len(window.text) == len(CUT_MARKER) + MAX_LINE_CHARS
    assert window.offset == len(line)
    answer = alice_client.get(f"/api/v1/jobs/{pod.job_id}/logs/").json()
    assert answer["text"] == window.text and answer["offset"] == len(line)


def test_the_same_line_with_its_newline_and_lines_after_it(pod) -> None:
    write_log(pod, b"x" * (2 * TAIL_WINDOW_BYTES) + b"\nepoch 1\nepoch 2\n")
    assert tail_window(pod, 200).text == CUT_MARKER + "x" * MAX_LINE_CHARS + "\nepoch 1\nepoch 2\n"
    assert tail_window(pod, 2).text == "epoch 1\nepoch 2\n"  # the cut piece is not one of the last 2 lines


def test_a_long_line_inside_the_window_is_cut_to_its_last_part(pod) -> None:
    write_log(pod, b"start\n" + b"a" * 10 + b"b" * MAX_LINE_CHARS + b"\nend\n")
    assert tail_window(pod, 200).text == "start\n" + CUT_MARKER + "b" * MAX_LINE_CHARS + "\nend\n"


def test_an_ordinary_log_reads_as_before(pod) -> None:
    lines = [f"line {i:06d} " + "." * 90 for i in range(5000)]  # ~500 KiB: more than the window
    write_log(pod, ("\n".join(lines) + "\n").encode())
    text = tail_window(pod, 200).text
    assert text == "\n".join(lines[-200:]) + "\n" and CUT_MARKER not in text
