"""Drive `bin/cluster` from tests and scripts: an isolated stack (own directory, database, port, node
names), an HTTP client with a personal API token or the session, and teardown that drops the database."""

from __future__ import annotations

import http.cookiejar
import json
import os
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def require_nginx() -> None:
    """bin/cluster puts nginx in front of the console: skip (with the fix) where it is not installed."""
    import shutil

    import pytest

    if not (os.environ.get("TIDEPOOL_NGINX") or shutil.which("nginx") or os.path.exists("/usr/sbin/nginx")):
        pytest.skip("needs nginx for bin/cluster's front (Debian: apt-get install -y nginx)")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@dataclass
class Stack:
    directory: Path
    database: str
    redis_url: str
    nodes: tuple[str, ...] = ("stack-a", "stack-b")
    port: int = field(default_factory=free_port)
    extra_env: dict[str, str] = field(default_factory=dict)
    scheme: str = "http"  # "https" with TIDEPOOL_TLS_CERT / TIDEPOOL_TLS_KEY in extra_env

    def tls(self) -> ssl.SSLContext | None:
        """Client context for the stack's own (self-signed) certificate: loopback only."""
        if self.scheme != "https":
            return None
        context = ssl.create_default_context(cafile=self.extra_env["TIDEPOOL_TLS_CERT"])
        context.check_hostname = False
        return context

    def env(self) -> dict[str, str]:
        return {
            **{k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "TIDEPOOL_DATA_DIR")},
            "TIDEPOOL_CLUSTER_DIR": str(self.directory),
            "TIDEPOOL_CLUSTER_DB": self.database,
            "REDIS_URL": self.redis_url,
            "TIDEPOOL_PORT": str(self.port),
            "TIDEPOOL_CLUSTER_NODES": " ".join(self.nodes),
            "TIDEPOOL_PYTHON": os.environ.get("TIDEPOOL_PYTHON", str(ROOT / ".venv" / "bin" / "python")),
            **self.extra_env,
        }

    def run(self, *args: str, timeout: float = 180) -> subprocess.CompletedProcess:
        return subprocess.run([str(ROOT / "bin" / "cluster"), *args], cwd=ROOT, env=self.env(), text=True,
                              capture_output=True, timeout=timeout)

    def url(self, path: str) -> str:
        return f"{self.scheme}://127.0.0.1:{self.port}{path}"

    def logs(self) -> str:
        parts = []
        for log in sorted((self.directory / "logs").glob("*.log")):
            parts.append(f"==== {log.name}\n" + "\n".join(log.read_text(errors="replace").splitlines()[-40:]))
        return "\n".join(parts)

    def drop_database(self) -> None:
        import psycopg
        from psycopg import sql

        with psycopg.connect(host=os.environ.get("PGHOST", "127.0.0.1"), port=os.environ.get("PGPORT", "5432"),
                             user=os.environ.get("PGUSER", "postgres"), dbname="postgres", autocommit=True) as conn:
            conn.execute(sql.SQL("drop database if exists {} with (force)").format(sql.Identifier(self.database)))


class Api:
    """JSON to /api/v1/ with a personal API token of `username`, made in the stack's database."""

    def __init__(self, stack: Stack, username: str) -> None:
        self.stack = stack
        self.auth = f"Bearer {make_token(stack, username)}"

    def call(self, method: str, path: str, body: Any = None, timeout: float = 30) -> tuple[int, Any]:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.stack.url(path), data=data, method=method,
                                         headers={"Authorization": self.auth, "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=timeout, context=self.stack.tls()) as response:
                return response.status, json.loads(response.read() or b"null")
        except urllib.error.HTTPError as error:
            payload = error.read()
            try:
                return error.code, json.loads(payload)
            except ValueError:
                return error.code, payload.decode(errors="replace")[:500]

    def get(self, path: str) -> Any:
        status, body = self.call("GET", path)
        assert status == 200, (path, status, body)
        return body


def make_token(stack: Stack, username: str) -> str:
    """A new personal API token of `username` (scheduler.services.tokens), through manage.py shell."""
    host, port, user = (os.environ.get(k, d) for k, d in (("PGHOST", "127.0.0.1"), ("PGPORT", "5432"),
                                                         ("PGUSER", "postgres")))
    password = os.environ.get("PGPASSWORD")
    env = {**stack.env(), "DATABASE_URL": f"postgres://{user}{':' + password if password else ''}@{host}:{port}/"
           f"{stack.database}"}
    code = ("from django.contrib.auth.models import User; from scheduler.services.tokens import token_create; "
            f"print(token_create(user=User.objects.get(username={username!r}), name='stack-test').secret)")
    python = env.get("TIDEPOOL_PYTHON", str(ROOT / ".venv" / "bin" / "python"))
    done = subprocess.run([python, str(ROOT / "manage.py"), "shell", "-c", code], cwd=ROOT, env=env, text=True,
                          capture_output=True, timeout=120, check=True)
    return done.stdout.strip().splitlines()[-1]


def session_cookie(stack: Stack, username: str, password: str) -> str:
    """Log in through the login page (as a browser does) and return the Cookie header for websockets."""
    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar),
                                         urllib.request.HTTPSHandler(context=stack.tls()))
    opener.open(stack.url("/accounts/login/"), timeout=30).read()
    csrf = next(c.value for c in jar if c.name == "csrftoken")
    form = urllib.parse.urlencode({"username": username, "password": password,
                                   "csrfmiddlewaretoken": csrf}).encode()
    opener.open(urllib.request.Request(stack.url("/accounts/login/"), data=form,
                                       headers={"Referer": stack.url("/accounts/login/")}), timeout=30).read()
    cookies = {c.name: c.value for c in jar}
    assert "sessionid" in cookies, "login failed"
    return "; ".join(f"{k}={v}" for k, v in cookies.items())


def wait_for(condition, timeout: float, what: str, step: float = 0.5) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(step)
