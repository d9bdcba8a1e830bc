"""The HTTP side of the CLI: configuration, requests to /api/v1/, errors as exit codes (docs/cli.md)."""

from __future__ import annotations

import json
import os
import stat
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

# Exit codes (docs/cli.md).
OK, REFUSED, USAGE, AUTH, NOT_FOUND, UNREACHABLE, CONFLICT = 0, 1, 2, 3, 4, 5, 6


class CliError(Exception):
    def __init__(self, message: str, code: int = REFUSED) -> None:
        super().__init__(message)
        self.code = code


DEFAULT_SERVER = "http://127.0.0.1:8000"  # bin/start's console (TIDEPOOL_PORT changes the port there)


def server_url(value: str, source: str = "server") -> str:
    """`value` as a console base URL (http:// or https://, a host, no trailing slash); anything else is
    refused with a CliError (exit 2) that says what a server looks like."""
    text = value.strip().rstrip("/")
    parsed = urllib.parse.urlsplit(text)
    example = f"e.g. {DEFAULT_SERVER} or https://tidepool.example.com"
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        hint = f" (did you mean http://{text}?)" if text and "://" not in text else ""
        raise CliError(f"{source}: {value!r} is not a server URL: give http:// or https:// and a host, {example}"
                       f"{hint}", USAGE)
    try:
        parsed.port  # noqa: B018 -- raises ValueError on a port that is not a number in range
    except ValueError:
        raise CliError(f"{source}: {value!r} has a bad port number ({example})", USAGE) from None
    if parsed.query or parsed.fragment:
        raise CliError(f"{source}: {value!r} has a query or fragment: give the console's address only ({example})",
                       USAGE)
    return text


def config_path() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "tidepool" / "config.yaml"


@dataclass
class Config:
    server: str
    token: str


def load_config() -> Config:
    """TIDEPOOL_SERVER / TIDEPOOL_TOKEN, else the config file `tidepool login` wrote; the server is checked
    (server_url), so a bad one is a clear error here rather than a traceback at the first request."""
    stored: dict[str, Any] = {}
    path = config_path()
    if path.exists():
        stored = yaml.safe_load(path.read_text()) or {}
    server = os.environ.get("TIDEPOOL_SERVER") or stored.get("server") or ""
    token = os.environ.get("TIDEPOOL_TOKEN") or stored.get("token") or ""
    if not server or not token:
        raise CliError("not logged in: run `tidepool login` or set TIDEPOOL_SERVER and TIDEPOOL_TOKEN", AUTH)
    source = "TIDEPOOL_SERVER" if os.environ.get("TIDEPOOL_SERVER") else f"server in {path}"
    return Config(server=server_url(server, source), token=token)


def save_config(config: Config) -> Path:
    """Write the config file readable by its owner only (0600), whatever the umask."""
    path = config_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        os.fchmod(out.fileno(), stat.S_IRUSR | stat.S_IWUSR)
        yaml.safe_dump({"server": config.server, "token": config.token}, out)
    return path


def _field_errors(body: Any) -> str:
    """A refusal's body as 'field: message' lines (the API keys errors by field)."""
    if not isinstance(body, dict):
        return str(body)
    lines = []
    for field, messages in body.items():
        text = "; ".join(str(m) for m in messages) if isinstance(messages, list) else str(messages)
        lines.append(text if field in ("detail", "non_field_errors") else f"{field}: {text}")
    return "\n".join(lines)


class Api:
    def __init__(self, config: Config, timeout: float = 30) -> None:
        self.config = config
        self.timeout = timeout

    def _request(self, method: str, path: str, body: Any = None, params: dict[str, Any] | None = None,
                 headers: dict[str, str] | None = None, timeout: float | None = None) -> Any:
        query = {k: v for k, v in (params or {}).items() if v not in (None, "", False)}
        url = f"{self.config.server}/api/v1/{path}" + (f"?{urllib.parse.urlencode(query)}" if query else "")
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(url, data=data, method=method, headers={
            "Authorization": f"Bearer {self.config.token}", "Accept": "application/json",
            **({"Content-Type": "application/json"} if data is not None else {}), **(headers or {}),
        })
        try:
            return urllib.request.urlopen(request, timeout=timeout or self.timeout)
        except urllib.error.HTTPError as error:
            raw = error.read().decode(errors="replace")
            try:
                payload: Any = json.loads(raw)
            except ValueError:
                payload = raw.strip()[:500] or error.reason
            code = {401: AUTH, 403: AUTH, 404: NOT_FOUND, 409: CONFLICT}.get(error.code, REFUSED)
            if error.code >= 500:
                code = UNREACHABLE
            raise CliError(_field_errors(payload) or f"HTTP {error.code}", code) from None
        except (urllib.error.URLError, OSError) as error:
            raise CliError(f"cannot reach {self.config.server}: {getattr(error, 'reason', error)} (is the console "
                           f"running there? bin/start serves {DEFAULT_SERVER}, or its TIDEPOOL_PORT)", UNREACHABLE) from None
        except ValueError as error:  # urllib's "unknown url type" and the like: a server that slipped past server_url
            raise CliError(f"server: {self.config.server!r} is not a usable URL ({error})", USAGE) from None

    def call(self, method: str, path: str, body: Any = None, **kwargs: Any) -> Any:
        with self._request(method, path, body, **kwargs) as response:
            raw = response.read()
        return json.loads(raw) if raw else None

    def get(self, path: str, **params: Any) -> Any:
        return self.call("GET", path, params=params)

    def stream_text(self, path: str, **params: Any) -> Iterator[str]:
        with self._request("GET", path, params=params, timeout=3600) as response:
            while chunk := response.read1(65536):
                yield chunk.decode(errors="replace")

    def events(self, path: str, **params: Any) -> Iterator[tuple[str, Any]]:
        """Server-sent events of `path`: (event name, parsed `data:` payload)."""
        with self._request("GET", path, params=params, headers={"Accept": "text/event-stream"},
                           timeout=3600) as response:
            name, data = "message", []
            for raw in response:
                line = raw.decode().rstrip("\r\n")
                if line.startswith("event:"):
                    name = line[6:].strip()
                elif line.startswith("data:"):
                    data.append(line[5:].lstrip())
                elif not line:
                    if data:
                        yield name, json.loads("\n".join(data))
                    name, data = "message", []

    def job_id(self, ref: str) -> int:
        """A job id from an id or an exact name (the newest job of that name)."""
        if ref.isascii() and ref.isdigit():  # "²".isdigit() is true, and int("²") raises
            return int(ref)
        page = self.get("jobs/", q=ref)
        matches = [job for job in page["results"] if job["name"] == ref]
        if not matches:
            raise CliError(f"job: no job named {ref!r}", NOT_FOUND)
        return matches[0]["id"]
