"""WSGI entry point: Django's stock handler, for the HTTP workers behind nginx (config/serving_http.py).

Every view of the console and the API is synchronous, so a WSGI worker runs each request with no
thread hop between an event loop and the view; the open-ended streams (async views) are routed by
nginx to the ASGI server (config/asgi.py) instead.
"""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

application = get_wsgi_application()
