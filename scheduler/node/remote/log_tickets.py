"""Pod logs from their node to the console, over an authenticated channel (DESIGN §6), both sides.

A pod's log stays on its node. To read part of it, the console asks the node's agent directly
(`GET http://<node address>:<log port>/log?ticket=…`, no broadcast) with a **ticket** it signs:

    ticket = base64url(JSON {node, pod, attempt, path, offset, max_bytes, expires, nonce}) "." hex(HMAC)

The HMAC-SHA256 key is the node's *ticket key*: HMAC(SECRET_KEY, "tidepool-node-log-ticket" + the
digest of the node's key) (services/node_keys.node_log_ticket_key). The console can compute it (it
holds SECRET_KEY and the digest); the agent receives it when it registers, over the channel its node
key authenticates, and keeps it in memory only. So a ticket is forged neither by another node (its
ticket key differs), nor by a pod, nor by someone who can read the database (no SECRET_KEY there);
a rotated node key changes it. The agent serves a ticket only when it names its own node, is fresh
(`expires` within LEEWAY_S of its clock, so a clock 5 minutes off still works) and has not been used
(its nonce is remembered), and reads only the path the console signed (derived from the pod row).
Its answer is signed with the same key (header `X-Tidepool-Signature`), so the console knows the log
came from the pod's node.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import threading
import time
from dataclasses import asdict, dataclass
from typing import Any

SIGNATURE_HEADER = "X-Tidepool-Signature"
TICKET_LIFETIME_S = 60.0
LEEWAY_S = 15 * 60.0  # clocks of the console and the node may differ this much


class TicketRefused(Exception):
    """Not a valid ticket for this node (bad signature, another node's, stale, used); the message says which."""


@dataclass(frozen=True)
class LogTicket:
    node: str
    pod: int
    attempt: int
    path: str
    offset: int
    max_bytes: int
    expires: float
    nonce: str


def sign(key: bytes, data: bytes) -> str:
    return hmac.new(key, data, hashlib.sha256).hexdigest()


def make_ticket(key: bytes, *, node: str, pod: int, attempt: int, path: str, offset: int, max_bytes: int,
                now: float | None = None) -> str:
    """A one-use ticket for this log window, signed with the node's ticket key."""
    ticket = LogTicket(node=node, pod=pod, attempt=attempt, path=path, offset=offset, max_bytes=max_bytes,
                       expires=(time.time() if now is None else now) + TICKET_LIFETIME_S,
                       nonce=secrets.token_hex(16))
    body = json.dumps(asdict(ticket), separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(body).decode().rstrip("=") + "." + sign(key, body)


class TicketChecker:
    """The node side: verifies tickets for `node` with `key`, each nonce once."""

    def __init__(self, node: str, key: bytes) -> None:
        self.node, self.key = node, key
        self._seen: dict[str, float] = {}  # nonce -> when it may be forgotten (this clock)
        self._lock = threading.Lock()

    def check(self, token: str, now: float | None = None) -> LogTicket:
        now = time.time() if now is None else now
        encoded, _, signature = token.partition(".")
        try:
            body = base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4))
        except ValueError:
            raise TicketRefused("not a ticket") from None
        if not signature or not hmac.compare_digest(sign(self.key, body), signature):
            raise TicketRefused("bad signature: not signed by this node's console")
        try:
            ticket = LogTicket(**json.loads(body))
        except (ValueError, TypeError):
            raise TicketRefused("not a ticket") from None
        if ticket.node != self.node:
            raise TicketRefused(f"a ticket for node {ticket.node}, not {self.node}")
        if abs(ticket.expires - now) > LEEWAY_S + TICKET_LIFETIME_S:
            raise TicketRefused("stale ticket")
        with self._lock:
            self._seen = {nonce: until for nonce, until in self._seen.items() if until > now}
            if ticket.nonce in self._seen:
                raise TicketRefused("ticket already used")
            self._seen[ticket.nonce] = now + 2 * (LEEWAY_S + TICKET_LIFETIME_S)
        return ticket


def answer_body(chunk: Any) -> bytes:
    return json.dumps(asdict(chunk), separators=(",", ":")).encode()


def check_answer(key: bytes, body: bytes, signature: str) -> dict[str, Any]:
    """The console side: the node's answer, when it carries the node's signature; else TicketRefused."""
    if not signature or not hmac.compare_digest(sign(key, body), signature):
        raise TicketRefused("the answer is not signed by the pod's node")
    return json.loads(body)
