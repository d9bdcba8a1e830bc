"""The node agent's log server: `GET /log?ticket=…` answers one window of one pod's log, for the
console only (a ticket it signed: log_tickets.py), at most NODE_MAX_BYTES; everything else 404."""

from __future__ import annotations

import json
import logging
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from scheduler.node.remote.log_tickets import (
    SIGNATURE_HEADER,
    TicketChecker,
    TicketRefused,
    answer_body,
    sign,
)
from scheduler.node.runtime.logs import NODE_MAX_BYTES, read_chunk

log = logging.getLogger("tidepool.node-agent.logs")


class LogServer:
    def __init__(self, address: str, port: int) -> None:
        self.checker: TicketChecker | None = None  # set once the agent registered (its ticket key)
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                url = urllib.parse.urlsplit(self.path)
                token = urllib.parse.parse_qs(url.query).get("ticket", [""])[0]
                if url.path != "/log" or not token:
                    return self._send(404, b'{"refused":"GET /log?ticket=..."}')
                if server.checker is None:
                    return self._send(503, b'{"refused":"not registered yet"}')
                try:
                    ticket = server.checker.check(token)
                except TicketRefused as error:
                    log.warning("log request refused: %s", error)
                    return self._send(403, json.dumps({"refused": str(error)}).encode())
                chunk = read_chunk(ticket.path, ticket.offset, max(0, min(ticket.max_bytes, NODE_MAX_BYTES)))
                body = answer_body(chunk)
                self._send(200, body, sign(server.checker.key, body))

            def _send(self, status: int, body: bytes, signature: str = "") -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                if signature:
                    self.send_header(SIGNATURE_HEADER, signature)
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:  # noqa: A002 (http.server's name)
                return  # one line per request would drown the agent's log

        self._http = ThreadingHTTPServer((address, port), Handler)
        self._http.daemon_threads = True
        self.port = self._http.server_address[1]
        self._thread = threading.Thread(target=self._http.serve_forever, name="tidepool-log-server", daemon=True)

    def start(self) -> LogServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._http.shutdown()
        self._http.server_close()
