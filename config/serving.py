"""gunicorn config of the ASGI server: stock uvicorn workers serving config.asgi (HTTP and websockets).

    gunicorn -c python:config.serving          # bin/cluster starts it this way, behind nginx

Behind bin/cluster's nginx it serves the websockets and the open-ended streams (/api/v1/jobs/watch/,
followed logs) while the WSGI workers (config/serving_http.py) answer every other request. Started
alone it serves everything on one port (scripts/chaos.py runs it so). The Redis channel layer fans
updates out to whichever worker holds a socket, so any number of workers share the websockets.

Environment (defaults in brackets):
- TIDEPOOL_BIND [127.0.0.1:8000] — address:port (or unix:PATH) to listen on
- TIDEPOOL_LIVE_WORKERS, else TIDEPOOL_WEB_WORKERS [3 × CPU cores, 2 to 32] — worker processes; each
  runs TIDEPOOL_WEB_CONCURRENCY [1] HTTP view at a time (config/asgi.py) and holds its share of the
  websockets
- TIDEPOOL_WEB_TIMEOUT [60] — seconds a worker may stay silent before gunicorn restarts it
- FORWARDED_ALLOW_IPS [127.0.0.1] — proxies whose X-Forwarded-* headers are trusted
- TIDEPOOL_ACCESS_LOG [unset: none] — "-" for stdout or a file path
"""

from __future__ import annotations

import os

from uvicorn_worker import UvicornWorker


def default_workers() -> int:
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cores = os.cpu_count() or 1
    return max(2, min(3 * cores, 32))


class TidepoolUvicornWorker(UvicornWorker):
    """The stock uvicorn worker with uvicorn-worker's documented CONFIG_KWARGS: no lifespan protocol
    (Django has none) and websocket pings every 20 s, so idle sockets through proxies and NAT stay
    open."""

    CONFIG_KWARGS = {"loop": "auto", "http": "auto", "lifespan": "off", "ws_ping_interval": 20.0,
                     "ws_ping_timeout": 20.0}


wsgi_app = "config.asgi:application"
worker_class = "config.serving.TidepoolUvicornWorker"
bind = [os.environ.get("TIDEPOOL_BIND", "127.0.0.1:8000")]
workers = int(os.environ.get("TIDEPOOL_LIVE_WORKERS") or os.environ.get("TIDEPOOL_WEB_WORKERS") or default_workers())
timeout = int(os.environ.get("TIDEPOOL_WEB_TIMEOUT", "60"))
graceful_timeout = 20
keepalive = 5
forwarded_allow_ips = os.environ.get("FORWARDED_ALLOW_IPS", "127.0.0.1")
accesslog = os.environ.get("TIDEPOOL_ACCESS_LOG") or None
errorlog = "-"
proc_name = "tidepool-live"
# gunicorn ≥ 25.1 opens a control socket at one path per user ($HOME/.gunicorn/gunicorn.ctl): two
# consoles on one host would fight over it.
control_socket_disable = True
