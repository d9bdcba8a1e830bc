"""One request at a time per web worker, taken from one shared queue: the listening socket's.

gunicorn's uvicorn workers share one listening socket, and each worker's event loop accepts every
connection that is waiting when it wakes, busy or not; a keep-alive connection then stays with the
worker that accepted it. Under 50 closed-loop API clients that left 25 / 11 / 8 / 6 connections on
four workers, and the clients of the busiest worker set everyone's p95. A reverse proxy with a
request queue (HAProxy's `maxconn` per server) fixes that by dispatching each request to a free
worker; this does the same without one:

- a worker stops accepting while it holds TIDEPOOL_WEB_CONCURRENCY connections that have not had
  their answer started, and resumes as soon as one has — so a waiting connection stays in the
  kernel's accept queue until some worker is free, first come, first served;
- it accepts one connection per wake-up (asyncio's own accept loop takes up to 100 at once);
- every HTTP response says `connection: close`, so each connection carries one request (as
  nginx's and HAProxy's connections to their upstreams do by default). A websocket stops counting
  when it is upgraded, a streamed response (event stream, followed log) when its answer starts;
- a connection that sends no request within TIDEPOOL_WEB_FIRST_BYTE_TIMEOUT seconds is closed, so
  idle sockets cannot keep a worker from accepting.

It needs asyncio's selector event loop (add_reader on the listening socket); config.serving runs
uvicorn on it. Nothing here touches Django: the embedded console (daphne) does not use it.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import ssl
from collections.abc import Callable
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.server import Server

logger = logging.getLogger(__name__)


class AcceptGate:
    """Counts this worker's connections that are waiting for their answer, and accepts only while
    fewer than `limit` are."""

    def __init__(self, limit: int, first_byte_timeout: float) -> None:
        self.limit = max(1, limit)
        self.first_byte_timeout = first_byte_timeout
        self.waiting = 0  # accepted connections whose answer has not started
        self.loop: asyncio.AbstractEventLoop | None = None
        self.listeners: list[tuple[socket.socket, asyncio.base_events.Server, Callable[[], asyncio.Protocol]]] = []
        self.accepting = False
        self.ssl: ssl.SSLContext | None = None

    def install(self, loop: asyncio.AbstractEventLoop, servers: list[asyncio.base_events.Server],
                sockets: list[socket.socket], protocol_factory: Callable[[], asyncio.Protocol],
                ssl_context: ssl.SSLContext | None = None) -> None:
        """Take the listening sockets over from the servers uvicorn created on them (TLS included, when
        gunicorn was given a certificate)."""
        self.loop = loop
        self.ssl = ssl_context
        for server, sock in zip(servers, sockets, strict=True):
            loop.remove_reader(sock.fileno())  # asyncio's accept loop
            self.listeners.append((sock, server, protocol_factory))
        self._resume()

    def taken(self) -> None:
        self.waiting += 1
        if self.waiting >= self.limit:
            self._pause()

    def given_back(self) -> None:
        self.waiting -= 1
        if self.waiting < self.limit:
            self._resume()

    def _pause(self) -> None:
        if self.accepting and self.loop is not None:
            for sock, _server, _factory in self.listeners:
                self.loop.remove_reader(sock.fileno())
            self.accepting = False

    def _resume(self) -> None:
        if self.accepting or self.loop is None:
            return
        for sock, server, factory in self.listeners:
            if server.is_serving() and sock.fileno() != -1:  # not while shutting down
                self.loop.add_reader(sock.fileno(), self._accept_one, sock, factory)
                self.accepting = True

    def _accept_one(self, sock: socket.socket, factory: Callable[[], asyncio.Protocol]) -> None:
        if self.waiting >= self.limit:  # another listener's wake-up in the same loop turn
            self._pause()
            return
        try:
            connection, _address = sock.accept()
        except (BlockingIOError, InterruptedError, ConnectionAbortedError):
            return  # another worker took it
        except OSError as error:  # EMFILE and the like: back off a little, as asyncio does
            logger.warning("accept failed: %s", error)
            self._pause()
            assert self.loop is not None
            self.loop.call_later(1.0, self._resume)
            return
        connection.setblocking(False)
        self.taken()
        assert self.loop is not None
        self.loop.create_task(self._connect(connection, factory))

    async def _connect(self, connection: socket.socket, factory: Callable[[], asyncio.Protocol]) -> None:
        assert self.loop is not None
        try:
            await self.loop.connect_accepted_socket(factory, connection, ssl=self.ssl)
        except Exception:
            connection.close()
            self.given_back()
            logger.exception("could not set up an accepted connection")


class GatedHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's HTTP protocol that tells the worker's gate when its connection stops waiting."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # The worker's gate, set by GatedServer's factory on connections the gate accepted and counted
        # (asyncio's own accept loop may take a few before the gate is installed: those are not).
        self.gate: AcceptGate | None = None
        self._waiting = False
        self._first_byte_timer: asyncio.TimerHandle | None = None
        inner = self.app

        async def app_closing_after_answer(scope, receive, send):
            self._cancel_first_byte_timer()

            async def send_then_stop_waiting(message):
                if message["type"] == "http.response.start":
                    headers = [(k, v) for k, v in message.get("headers", []) if k.lower() != b"connection"]
                    message = {**message, "headers": [*headers, (b"connection", b"close")]}
                    self._stop_waiting()
                await send(message)

            return await inner(scope, receive, send_then_stop_waiting)

        self.app = app_closing_after_answer

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if self.gate is not None:
            self._waiting = True  # counted when accepted
            self._first_byte_timer = self.loop.call_later(self.gate.first_byte_timeout, self._close_if_silent)

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_first_byte_timer()
        self._stop_waiting()
        super().connection_lost(exc)

    def handle_websocket_upgrade(self) -> None:
        self._cancel_first_byte_timer()
        self._stop_waiting()  # the websocket protocol owns the connection from here
        super().handle_websocket_upgrade()

    def _close_if_silent(self) -> None:
        self._first_byte_timer = None
        if self.cycle is None and self.transport is not None and not self.transport.is_closing():
            self.transport.close()

    def _cancel_first_byte_timer(self) -> None:
        if self._first_byte_timer is not None:
            self._first_byte_timer.cancel()
            self._first_byte_timer = None

    def _stop_waiting(self) -> None:
        if self._waiting:
            self._waiting = False
            if self.gate is not None:
                self.gate.given_back()


class GatedServer(Server):
    """uvicorn's server with the gate accepting on the sockets gunicorn handed over."""

    def __init__(self, *args: Any, gate: AcceptGate, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.gate = gate

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        if not sockets or not getattr(self, "servers", None):
            return
        config = self.config
        protocol_class = config.http_protocol_class
        if not issubclass(protocol_class, GatedHttpToolsProtocol):
            raise TypeError(f"the accept gate needs http={GatedHttpToolsProtocol.__name__}, not {protocol_class}")
        gate = self.gate

        def create_protocol() -> asyncio.Protocol:
            protocol = protocol_class(config=config, server_state=self.server_state, app_state=self.lifespan.state)
            protocol.gate = gate
            return protocol

        self.gate.install(asyncio.get_running_loop(), self.servers, sockets, create_protocol, config.ssl)
