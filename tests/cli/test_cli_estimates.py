"""DESIGN §2d in the CLI: `tidepool jobs` and `tidepool get` show the API's start estimate where the queue
position is, and a running job's nearing time limit."""

from __future__ import annotations

from test_cli_unit import job

from tidepool_cli.client import Api
from tidepool_cli.parser import run


def test_jobs_and_get_show_the_start_estimate(monkeypatch, capsys) -> None:
    monkeypatch.setenv("TIDEPOOL_SERVER", "http://x")
    monkeypatch.setenv("TIDEPOOL_TOKEN", "t")
    waiting = job("Pending", nodes=[], in_quota=None, queue_position=2, start_estimate="starts in about 2 h 10 min",
                  time_limit_note="", pods=[])
    monkeypatch.setattr(Api, "get", lambda self, path, **params: {"results": [waiting], "next": None}
                        if path == "jobs/" else waiting)
    monkeypatch.setattr(Api, "job_id", lambda self, ref: 7)
    assert run(["jobs"]) == 0
    header, row = capsys.readouterr().out.splitlines()[:2]
    assert header.split()[-2:] == ["QUEUE-POSITION", "START-ESTIMATE"]
    assert row.endswith("2               starts in about 2 h 10 min")
    assert run(["get", "7"]) == 0
    out = capsys.readouterr().out
    assert "start_estimate:  starts in about 2 h 10 min" in out and "time_limit_note" not in out
    running = dict(waiting, status="Running", queue_position=None, start_estimate="",
                   time_limit_note="time limit in 4 min")
    monkeypatch.setattr(Api, "get", lambda self, path, **params: running)
    assert run(["get", "7"]) == 0
    out = capsys.readouterr().out
    assert "time_limit_note: time limit in 4 min" in out and "start_estimate" not in out
