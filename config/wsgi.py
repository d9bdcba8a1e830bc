"""WSGI entry point: Django's stock handler, for the HTTP workers behind nginx (config/serving_http.py).

Every view of the console and the API is synchronous, so a WSGI worker runs each request with no
thread hop between an event loop and the view; the open-ended streams (async views) are routed by
nginx to the ASGI server (config/asgi.py) instead.
"""

import os

from django.core.wsgi import get_wsgi_application
from django.db import connections
from django.urls import get_resolver

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

application = get_wsgi_application()

# Import every view now (the URLconf is otherwise loaded by the first request): with gunicorn's
# preload_app (config/serving_http.py) this runs once in the master, before the workers fork. It
# opens no database connection; close_all() makes sure none is inherited by the forked workers.
get_resolver().reverse_dict  # noqa: B018 (the property imports every view and builds the reverse table)
connections.close_all()
