"""Plotly's JavaScript, served from the installed Python package: the console works on a closed network.

The URL carries the package version, so the response can be cached for a year and a Plotly
upgrade still reaches every browser at once. The 4.8 MB bundle is gzipped once per process.
"""

from __future__ import annotations

import gzip
import hashlib
from functools import lru_cache

from django.http import Http404, HttpRequest, HttpResponse, HttpResponseNotModified
from django.views.decorators.http import require_GET

ONE_YEAR = 365 * 24 * 3600


@lru_cache(maxsize=1)
def plotly_version() -> str:
    import plotly

    return plotly.__version__


@lru_cache(maxsize=1)
def _bundle() -> tuple[bytes, bytes, str]:
    """(plain, gzipped, etag) of plotly.min.js."""
    from plotly.offline import get_plotlyjs

    plain = get_plotlyjs().encode("utf-8")
    etag = '"' + hashlib.sha256(plain).hexdigest()[:32] + '"'
    return plain, gzip.compress(plain, compresslevel=6, mtime=0), etag


@require_GET
def plotly_js(request: HttpRequest, version: str) -> HttpResponse:
    if version != plotly_version():
        raise Http404(f"This server has Plotly {plotly_version()}, not {version}.")
    plain, zipped, etag = _bundle()
    headers = {
        "Cache-Control": f"public, max-age={ONE_YEAR}, immutable",
        "ETag": etag,
        "Vary": "Accept-Encoding",
    }
    if request.headers.get("If-None-Match") == etag:
        return HttpResponseNotModified(headers=headers)
    if "gzip" in request.headers.get("Accept-Encoding", ""):
        response = HttpResponse(zipped, content_type="text/javascript; charset=utf-8", headers=headers)
        response["Content-Encoding"] = "gzip"
        return response
    return HttpResponse(plain, content_type="text/javascript; charset=utf-8", headers=headers)
