"""The node API (/api/node/v1/, docs/runtime.md) over HTTP(S), authenticated by the node's key only."""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request
from typing import Any

TIMEOUT_S = 15.0


class ConsoleRefused(Exception):
    """The console answered with an error (`status`): 401 key refused, 403 not this node's pod, 409 lease."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(f"{status}: {detail}")
        self.status, self.detail = status, detail


class ConsoleUnreachable(Exception):
    """No answer from the console (network, DNS, TLS, a 5xx): retried on the agent's next pass."""


class NodeApi:
    def __init__(self, console_url: str, node_key: str, *, ca_file: str = "", timeout: float = TIMEOUT_S) -> None:
        self.base = f"{console_url.rstrip('/')}/api/node/v1/"
        self._key = node_key
        self._timeout = timeout
        self._tls = ssl.create_default_context(cafile=ca_file or None) if console_url.startswith("https") else None

    def call(self, method: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.base + path, data=data, method=method, headers={
            "Authorization": f"Bearer {self._key}", "Accept": "application/json",
            **({"Content-Type": "application/json"} if data is not None else {})})
        try:
            with urllib.request.urlopen(request, timeout=self._timeout, context=self._tls) as answer:
                return json.loads(answer.read() or b"{}")
        except urllib.error.HTTPError as error:
            text = error.read().decode("utf-8", "replace")
            try:
                detail = json.loads(text)
            except ValueError:
                detail = text[:500]
            if error.code >= 500:
                raise ConsoleUnreachable(f"{method} {path}: the console answered {error.code}") from None
            if isinstance(detail, dict) and set(detail) == {"detail"}:
                detail = detail["detail"]
            raise ConsoleRefused(error.code, str(detail)) from None
        except (urllib.error.URLError, OSError, ValueError) as error:
            raise ConsoleUnreachable(f"{method} {path}: {error}") from None

    def register(self, inventory: dict[str, Any]) -> dict[str, Any]:
        return self.call("POST", "register/", inventory)

    def heartbeat(self, agent: str, gpus: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        """`gpus`: NVML readings (runtime/gpus.sample_gpus) for the GPU chart; None where NVML is absent."""
        return self.call("POST", "heartbeat/", {"agent": agent, **({"gpus": gpus} if gpus else {})})

    def release(self, agent: str) -> dict[str, Any]:
        return self.call("POST", "release/", {"agent": agent})

    def pods(self, *, recently_ended: bool = False) -> list[dict[str, Any]]:
        return self.call("GET", "pods/" + ("?recently_ended=1" if recently_ended else ""))["pods"]

    def report(self, pod_id: int, attempt: int, event: str, **fields: Any) -> bool:
        """True when the console applied it; False when the pod had moved on (fenced)."""
        return bool(self.call("POST", f"pods/{pod_id}/report/",
                              {"attempt": attempt, "event": event, **fields}).get("applied"))
