"""The first REST API (/api/) was removed for /api/v1/: every old path answers 410 Gone with a JSON
body naming the v1 path that replaces it (or v1's docs where nothing does), so a script still calling
it learns what to call instead rather than getting a 404 or the console's login page."""

from __future__ import annotations

import re
from dataclasses import dataclass

from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt

V1_DOCS = "/api/v1/docs/"
AUTH_HINT = ("v1 takes a personal API token (header `Authorization: Bearer tp_…`, console: Settings → API tokens) "
             "or the console's session; HTTP Basic is not accepted.")
QUOTA_WRITES = "v1 reads quotas only: staff create, change and delete them on the console's Quotas page (/quotas/)."
NODE_ACTIONS = "v1 has no node actions: staff cordon, uncordon and drain nodes on the console's Nodes page (/nodes/)."
READS = frozenset({"GET", "HEAD", "OPTIONS"})


@dataclass(frozen=True)
class OldRoute:
    pattern: re.Pattern[str]  # the old path below /api/, trailing slash optional
    v1: str  # the replacing path; {pk} is the old path's id
    note: str = ""  # what v1 does differently, for every method
    writes_note: str = ""  # what v1 does differently for the old route's writes


def _route(pattern: str, v1: str, note: str = "", writes_note: str = "") -> OldRoute:
    return OldRoute(re.compile(rf"^{pattern}/?$"), v1, note, writes_note)


_ID = r"(?P<pk>[0-9]+)"
OLD_ROUTES = (
    _route("", V1_DOCS),
    _route("jobs", "/api/v1/jobs/"),
    _route(f"jobs/{_ID}", "/api/v1/jobs/{pk}/"),
    _route(f"jobs/{_ID}/stop", "/api/v1/jobs/{pk}/stop/"),
    _route(f"jobs/{_ID}/restart", "/api/v1/jobs/{pk}/restart/"),
    _route(f"jobs/{_ID}/log", "/api/v1/jobs/{pk}/logs/", note="The log is at logs/ (plural); same parameters."),
    _route("quotas", "/api/v1/quotas/", writes_note=QUOTA_WRITES),
    _route(f"quotas/{_ID}", "/api/v1/quotas/{pk}/", writes_note=QUOTA_WRITES),
    _route("nodes", "/api/v1/nodes/"),
    _route(f"nodes/{_ID}/(?:cordon|uncordon|drain)", "/api/v1/nodes/", note=NODE_ACTIONS),
    _route("workspaces", "/api/v1/workspaces/"),
)


def v1_replacement(old_path: str, method: str = "GET") -> tuple[str, str]:
    """The v1 path replacing /api/<old_path> and what the caller should know (empty: same use)."""
    for route in OLD_ROUTES:
        found = route.pattern.match(old_path)
        if found:
            note = route.note or (route.writes_note if method.upper() not in READS else "")
            return route.v1.format(**found.groupdict()), note
    return V1_DOCS, f"/api/{old_path} was never a path of the API; v1's paths are listed at {V1_DOCS}."


@csrf_exempt  # changes nothing and reads no session: a script without a CSRF token must get the 410 too
def removed(request: HttpRequest, old_path: str) -> JsonResponse:
    v1, note = v1_replacement(old_path, request.method or "GET")
    detail = f"This API was removed: use {v1} (docs: {V1_DOCS}). " + (f"{note} " if note else "") + AUTH_HINT
    return JsonResponse({"detail": detail, "v1": v1}, status=410)
