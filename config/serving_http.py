"""gunicorn config of the HTTP workers behind nginx: stock sync workers serving config.wsgi.

    gunicorn -c python:config.serving_http          # bin/cluster starts it this way, behind nginx

Why sync workers: each runs one request at a time and takes a connection from the shared listening
socket only when it is free, so requests wait in the kernel's queue for whichever worker frees first
(first come, first served) and a slow request never holds others behind it. They must sit behind a
buffering proxy (nginx: it reads slow clients' requests and answers, and keeps the browsers'
keep-alive connections), and never serve streams: nginx sends websockets, /api/v1/jobs/watch/ and
followed logs to the ASGI server (config/serving.py).

Environment (defaults in brackets):
- TIDEPOOL_HTTP_BIND [127.0.0.1:8001] — where nginx reaches them (bin/cluster: a unix socket)
- TIDEPOOL_WEB_WORKERS [3 × CPU cores, 2 to 32] — processes; more than cores, as a request waiting
  for PostgreSQL leaves its core to another (measured with scripts/bench_api.py, docs/reliability.md)
- TIDEPOOL_WEB_TIMEOUT [60] — seconds one request may take before gunicorn restarts its worker
- TIDEPOOL_ACCESS_LOG [unset: none] — "-" for stdout or a file path
"""

from __future__ import annotations

import os

from config.serving import default_workers

wsgi_app = "config.wsgi:application"
worker_class = "sync"
# The master imports Django and every view once (config/wsgi.py warms the URLconf), then forks: each
# worker starts warm, so the first requests after a start or a restart do not wait seconds for the
# imports of their worker (measured: the first bench run's p95 after a start, docs/benchmarks.md).
# gunicorn's own setting; the price is that SIGHUP reloads configuration, not code (restart instead).
preload_app = True
bind = [os.environ.get("TIDEPOOL_HTTP_BIND", "127.0.0.1:8001")]
workers = int(os.environ.get("TIDEPOOL_WEB_WORKERS") or default_workers())
timeout = int(os.environ.get("TIDEPOOL_WEB_TIMEOUT", "60"))
graceful_timeout = 20
backlog = 2048  # the queue requests wait in when every worker is busy
forwarded_allow_ips = os.environ.get("FORWARDED_ALLOW_IPS", "127.0.0.1")
accesslog = os.environ.get("TIDEPOOL_ACCESS_LOG") or None
errorlog = "-"
proc_name = "tidepool-http"
# gunicorn ≥ 25.1 opens a control socket at one path per user ($HOME/.gunicorn/gunicorn.ctl): two
# servers on one host would fight over it.
control_socket_disable = True
