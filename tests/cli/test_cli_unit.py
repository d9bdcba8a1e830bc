"""The `tidepool` command without a server: configuration, the submission body, errors, no Django."""

from __future__ import annotations

import io
import json
import os
import stat
import subprocess
import sys
import urllib.error

import pytest

from tidepool_cli import client
from tidepool_cli.client import Api, CliError, Config, load_config, save_config
from tidepool_cli.parser import build_parser, run


@pytest.fixture(autouse=True)
def _config_home(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    monkeypatch.delenv("TIDEPOOL_SERVER", raising=False)
    monkeypatch.delenv("TIDEPOOL_TOKEN", raising=False)


def test_importing_the_cli_loads_no_django() -> None:
    code = "import sys, tidepool_cli.parser, tidepool_cli.main, tidepool_cli.client; print('django' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip() == "False"


def test_config_file_is_private_and_the_environment_wins(monkeypatch) -> None:
    old = os.umask(0)
    try:
        path = save_config(Config(server="https://a.example", token="tp_file"))
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert load_config() == Config(server="https://a.example", token="tp_file")
    monkeypatch.setenv("TIDEPOOL_TOKEN", "tp_env")
    monkeypatch.setenv("TIDEPOOL_SERVER", "https://b.example/")
    assert load_config() == Config(server="https://b.example", token="tp_env")


def test_not_logged_in_exits_3(capsys) -> None:
    assert run(["jobs"]) == 3
    assert "tidepool login" in capsys.readouterr().err


def test_flags_override_the_job_file(tmp_path) -> None:
    job = tmp_path / "job.yaml"
    job.write_text("name: a\nworkspace: vision\nquota: q\ncommand: train\n"
                   "roles: [{name: worker, pod_count: 1, gpus: 1}]\nenvironment: {A: '1'}\n")
    args = build_parser().parse_args(["submit", "-f", str(job), "--gpus", "4", "--priority", "5", "--env", "B=2",
                                      "--fault-tolerance", "--", "python", "x.py"])
    from tidepool_cli.main import submission

    body = submission(args)
    assert body["roles"] == [{"name": "worker", "pod_count": 1, "gpus": 4}]
    assert body["priority"] == 5 and body["environment"] == {"A": "1", "B": "2"}
    assert body["command"] == "python x.py" and body["fault_tolerance"] is True and body["name"] == "a"


def test_refusals_name_the_field_with_exit_codes(monkeypatch) -> None:
    def refuse(status: int, body: dict):
        def urlopen(request, timeout):
            raise urllib.error.HTTPError(request.full_url, status, "refused", {}, io.BytesIO(json.dumps(body).encode()))
        return urlopen

    api = Api(Config(server="http://x", token="t"))
    cases = [(400, {"roles[0].pod_count": ["Role worker needs at least 1 instance (got 0)."]}, 1),
             (401, {"detail": "API token tp_1234… was revoked."}, 3), (404, {"detail": "Not found."}, 4),
             (409, {"Idempotency-Key": ["used with a different body"]}, 6), (502, {"detail": "bad gateway"}, 5)]
    for status, body, code in cases:
        monkeypatch.setattr(client.urllib.request, "urlopen", refuse(status, body))
        with pytest.raises(CliError) as error:
            api.call("POST", "jobs/", {})
        assert error.value.code == code
        field = next(iter(body))
        assert (field in str(error.value)) == (field not in ("detail",))
    assert "roles[0].pod_count: Role worker" in str(CliError(client._field_errors(cases[0][1])))


class FakeResponse(io.BytesIO):
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def answer_me(seen: list[str]):
    """urlopen that answers /api/v1/me/ as alice and records each URL asked."""
    def urlopen(request, timeout):
        seen.append(request.full_url)
        return FakeResponse(json.dumps({"username": "alice", "workspaces": ["vision"]}).encode())
    return urlopen


def test_login_without_server_uses_the_local_console(monkeypatch, capsys) -> None:
    seen: list[str] = []
    monkeypatch.setattr(client.urllib.request, "urlopen", answer_me(seen))
    monkeypatch.setattr(sys, "stdin", io.StringIO("tp_secret\n"))  # echo "$TOKEN" | tidepool login
    assert run(["login"]) == 0
    assert seen == ["http://127.0.0.1:8000/api/v1/me/"]
    assert "Logged in to http://127.0.0.1:8000 as alice" in capsys.readouterr().out
    assert load_config() == Config(server="http://127.0.0.1:8000", token="tp_secret")


def test_login_takes_tidepool_server_from_the_environment(monkeypatch) -> None:
    seen: list[str] = []
    monkeypatch.setattr(client.urllib.request, "urlopen", answer_me(seen))
    monkeypatch.setenv("TIDEPOOL_SERVER", "http://127.0.0.1:8123/")
    assert run(["login", "--token", "tp_secret"]) == 0
    assert seen == ["http://127.0.0.1:8123/api/v1/me/"]


@pytest.mark.parametrize(("server", "says"), [
    ("127.0.0.1:8000", "did you mean http://127.0.0.1:8000?"),
    ("tidepool.example.com", "did you mean http://tidepool.example.com?"),
    ("ftp://tidepool.example.com", "give http:// or https:// and a host"),
    ("http://", "give http:// or https:// and a host"),
    ("http://127.0.0.1:80000", "bad port number"),
    ("http://127.0.0.1:8000/?next=x", "query or fragment"),
])
def test_a_bad_server_is_a_usage_error_not_a_traceback(server, says, monkeypatch, capsys) -> None:
    monkeypatch.setattr(client.urllib.request, "urlopen", lambda *a, **k: pytest.fail("no request with a bad URL"))
    assert run(["login", "--server", server, "--token", "tp_secret"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: --server: {server!r} ") and says in err and "Traceback" not in err
    monkeypatch.setenv("TIDEPOOL_SERVER", server)
    monkeypatch.setenv("TIDEPOOL_TOKEN", "tp_secret")
    assert run(["jobs"]) == 2
    assert f"error: TIDEPOOL_SERVER: {server!r}" in capsys.readouterr().err


def test_login_with_an_empty_token_says_where_to_get_one(monkeypatch, capsys) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO("\n"))
    assert run(["login"]) == 2
    assert "API tokens page" in capsys.readouterr().err


def test_an_unreachable_server_says_which_and_exits_5(monkeypatch, capsys) -> None:
    def refused(request, timeout):
        raise urllib.error.URLError(ConnectionRefusedError(111, "Connection refused"))
    monkeypatch.setattr(client.urllib.request, "urlopen", refused)
    assert run(["login", "--token", "tp_secret"]) == 5
    err = capsys.readouterr().err
    assert "cannot reach http://127.0.0.1:8000" in err and "bin/start" in err


def job(status: str, **extra) -> dict:
    return {"id": 7, "name": "bert", "status": status, "quota": "team-vision", "workspace": "vision",
            "owner": "alice", "in_quota": True, "nodes": ["gpu-01"], "queue_position": None, "gpus": 8, **extra}


def test_watch_prints_a_line_only_when_what_it_shows_changes(monkeypatch, capsys) -> None:
    monkeypatch.setenv("TIDEPOOL_SERVER", "http://x")
    monkeypatch.setenv("TIDEPOOL_TOKEN", "t")
    # The stream repeats a running job at each progress report (every ~2 s); only 3 of these differ.
    stream = [("job", job("Pending", nodes=[], in_quota=None, queue_position=2)), ("synced", {}),
              ("job", job("Pending", nodes=[], in_quota=None, queue_position=2, progress={"step": 0})),
              ("job", job("Running", progress={"step": 1}))]
    stream += [("job", job("Running", progress={"step": step})) for step in range(2, 30)]
    stream += [("job", job("Preempted", nodes=[], in_quota=None, queue_position=1))]
    monkeypatch.setattr(Api, "events", lambda self, path, **params: iter(stream))
    assert run(["jobs", "--watch"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["ID", "NAME", "STATUS", "QUOTA", "GPUS", "IN-QUOTA", "NODES", "QUEUE-POSITION",
                                "START-ESTIMATE"]
    assert lines[1].split() == ["7", "bert", "Pending", "team-vision", "8", "-", "-", "2", "-"]
    assert lines[2:] == ["id=7  name=bert  status=Running  in_quota=yes  nodes=gpu-01",
                         "id=7  name=bert  status=Preempted  in_quota=-  nodes=-  queue_position=1"]
    assert run(["jobs", "--watch", "--json"]) == 0  # scripts: every document that differs, one per line
    documents = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(documents) == len(stream) - 1 and documents[-1]["status"] == "Preempted"


@pytest.mark.parametrize("flag", ["--pods", "--gpus", "--priority", "--max-restarts", "--cpu", "--memory-gib"])
@pytest.mark.parametrize("value", ["١", "１", "²", "1_0", "nan", "0x10", "four"])
def test_number_flags_take_ascii_digits_only(flag, value, capsys) -> None:
    """argparse's int()/float() read "١" and "１" as 1 and "1_0" as 10: the CLI refuses them as the API does."""
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(["submit", flag, value])
    assert exited.value.code == 2
    assert "ASCII digits" in capsys.readouterr().err


def test_number_flags_read_ascii_numbers() -> None:
    args = build_parser().parse_args(["submit", "--pods", "2", "--cpu", "1.5", "--memory-gib", "8"])
    assert (args.pods, args.cpu, args.memory_gib) == (2, 1.5, 8.0)
    assert build_parser().parse_args(["logs", "job", "--lines", "50"]).lines == 50


def test_a_job_file_numbers_in_the_environment_are_sent_as_text(tmp_path) -> None:
    """YAML reads `PORT: 8080` as a number; the API takes environment values as text only."""
    from tidepool_cli.main import submission

    job = tmp_path / "job.yaml"
    job.write_text("name: a\nenvironment: {PORT: 8080, LR: 0.1, NAME: x, DEBUG: true}\n")
    body = submission(build_parser().parse_args(["submit", "-f", str(job)]))
    assert body["environment"] == {"PORT": "8080", "LR": "0.1", "NAME": "x", "DEBUG": True}  # the API refuses true


def test_a_job_reference_with_other_digits_is_a_name_not_a_crash(monkeypatch) -> None:
    api = Api(Config(server="http://x", token="t"))
    monkeypatch.setattr(api, "get", lambda path, **params: {"results": []})
    with pytest.raises(client.CliError) as refused:
        api.job_id("²")
    assert refused.value.code == 4


def test_drain_posts_to_the_nodes_drain_and_prints_its_state(monkeypatch, capsys) -> None:
    save_config(Config(server="http://x", token="t"))
    asked: list[tuple[str, str]] = []

    def urlopen(request, timeout):
        asked.append((request.get_method(), request.full_url))
        return FakeResponse(json.dumps({"name": "gpu 03", "resource_type": "general", "gpu_type": "A100",
                                        "gpu_count": 8, "gpus_used": 4, "schedulable": False, "draining": True,
                                        "lost": False}).encode())

    monkeypatch.setattr(client.urllib.request, "urlopen", urlopen)
    assert run(["drain", "gpu 03"]) == 0
    assert asked == [("POST", "http://x/api/v1/nodes/gpu%2003/drain/")]
    assert "draining" in capsys.readouterr().out
