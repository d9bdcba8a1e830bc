"""Every path under /api/v1/ that is none of its endpoints answers a JSON 404 naming where the paths are
listed, never Django's HTML page (which, with DEBUG, lists every URL pattern of the site)."""

from __future__ import annotations

from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt

V1_DOCS = "/api/v1/docs/"


@csrf_exempt  # reads no session and changes nothing: a POST to a wrong path learns it is wrong, not "CSRF"
def unknown_path(request: HttpRequest, path: str = "") -> JsonResponse:
    return JsonResponse(
        {"detail": f"/api/v1/{path} is no path of the API: the paths are listed at {V1_DOCS} "
                   "(schema: /api/v1/schema/)."},
        status=404,
    )
