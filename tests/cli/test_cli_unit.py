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
