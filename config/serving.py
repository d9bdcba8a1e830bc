"""Production serving: gunicorn managing uvicorn workers, each serving config.asgi (HTTP and websockets).

    gunicorn -c python:config.serving          # bin/cluster and docs/operations.md start it this way

Why this shape: Django runs sync views of an ASGI app one at a time per process (they share one
thread), so a single ASGI process (daphne alone) queues every request behind the one before it.
Several uvicorn workers under one gunicorn master give as many views in parallel, on one port, for
HTTP and websockets alike — no proxy rule splitting /ws/ from the rest, and the Redis channel layer
fans updates out to whichever worker holds a socket. Gunicorn restarts a worker that dies or hangs.

Environment (defaults in brackets):
- TIDEPOOL_BIND [127.0.0.1:8000] — address:port to listen on (a reverse proxy terminates TLS in front)
- TIDEPOOL_WEB_WORKERS [3 × CPU cores, 2 to 32] — worker processes; each runs
  TIDEPOOL_WEB_CONCURRENCY [1] view at a time and holds its share of the websockets. One view per
  process and more processes than cores: a view that waits for the database leaves its core to
  another process, and no two views of one process fight for its interpreter lock (measured with
  scripts/bench_api.py: 4 processes × 2 views gave 48/s, 4 × 1 gave 59/s, 6 × 1 gave 69/s).
- TIDEPOOL_WEB_TIMEOUT [60] — seconds a worker may stay silent before gunicorn restarts it
- TIDEPOOL_WEB_FIRST_BYTE_TIMEOUT [10] — seconds a new connection may stay silent before its worker
  closes it (the accept gate, config/accept_gate.py: a worker accepts only while it has a free view)
- FORWARDED_ALLOW_IPS [127.0.0.1] — proxies whose X-Forwarded-* headers are trusted
- TIDEPOOL_ACCESS_LOG [unset: none] — "-" for stdout or a file path
"""

from __future__ import annotations

import os
import sys

from gunicorn.arbiter import Arbiter
from uvicorn_worker import UvicornWorker as _UvicornWorker

from config.accept_gate import AcceptGate, GatedHttpToolsProtocol, GatedServer


def _default_workers() -> int:
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cores = os.cpu_count() or 1
    return max(2, min(3 * cores, 32))


class TidepoolUvicornWorker(_UvicornWorker):
    """uvicorn worker for Django: no lifespan protocol (Django has none), websocket pings every 20 s
    so idle sockets through proxies and NAT stay open, and the accept gate (config/accept_gate.py):
    a worker takes a connection from the shared queue only when it has a free view, one request per
    connection. The gate needs asyncio's selector loop, hence no uvloop (the views' own CPU dwarfs
    the loop's)."""

    CONFIG_KWARGS = {"loop": "asyncio", "http": GatedHttpToolsProtocol, "lifespan": "off",
                     "ws_ping_interval": 20.0, "ws_ping_timeout": 20.0}

    async def _serve(self) -> None:
        from django.conf import settings  # configured: loading the app (self.wsgi) ran django.setup()

        self.config.app = self.wsgi
        gate = AcceptGate(limit=settings.TIDEPOOL_WEB_CONCURRENCY or 1_000_000,  # 0: no limit, as in config.asgi
                          first_byte_timeout=settings.TIDEPOOL_WEB_FIRST_BYTE_TIMEOUT)
        server = GatedServer(config=self.config, gate=gate)
        self._install_sigquit_handler()
        await server.serve(sockets=self.sockets)
        if not server.started:
            sys.exit(Arbiter.WORKER_BOOT_ERROR)


wsgi_app = "config.asgi:application"
worker_class = "config.serving.TidepoolUvicornWorker"
bind = [os.environ.get("TIDEPOOL_BIND", "127.0.0.1:8000")]
workers = int(os.environ.get("TIDEPOOL_WEB_WORKERS") or _default_workers())
timeout = int(os.environ.get("TIDEPOOL_WEB_TIMEOUT", "60"))
graceful_timeout = 20
keepalive = 5
forwarded_allow_ips = os.environ.get("FORWARDED_ALLOW_IPS", "127.0.0.1")
accesslog = os.environ.get("TIDEPOOL_ACCESS_LOG") or None
errorlog = "-"
proc_name = "tidepool-web"
# gunicorn ≥ 25.1 opens a control socket at one path per user ($HOME/.gunicorn/gunicorn.ctl): two
# consoles on one host would fight over it. Off unless TIDEPOOL_CONTROL_SOCKET names a path.
control_socket_disable = not os.environ.get("TIDEPOOL_CONTROL_SOCKET")
if os.environ.get("TIDEPOOL_CONTROL_SOCKET"):
    control_socket = os.environ["TIDEPOOL_CONTROL_SOCKET"]
