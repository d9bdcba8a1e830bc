"""GET /metrics: the Prometheus text format, for a bearer token or an allowed address.

TIDEPOOL_METRICS_TOKEN: `Authorization: Bearer <token>` is accepted. TIDEPOOL_METRICS_ALLOW: the
networks (CIDR) allowed without a token, by the connection's address (REMOTE_ADDR; a proxy's
X-Forwarded-For is not trusted); default loopback only. Anything else: 403.
"""

from __future__ import annotations

import hmac
import ipaddress

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from scheduler.metrics.collector import TidepoolCollector
from scheduler.metrics.cycle import CYCLE_REGISTRY

_registry = CollectorRegistry(auto_describe=False)
_registry.register(TidepoolCollector())


def allowed(request: HttpRequest) -> bool:
    token = settings.TIDEPOOL_METRICS_TOKEN
    header = request.headers.get("Authorization", "")
    if token and header.startswith("Bearer ") and hmac.compare_digest(header[7:].strip(), token):
        return True
    try:
        address = ipaddress.ip_address(request.META.get("REMOTE_ADDR", ""))
    except ValueError:
        return False
    return any(address in ipaddress.ip_network(net, strict=False) for net in settings.TIDEPOOL_METRICS_ALLOW)


@require_GET
def metrics(request: HttpRequest) -> HttpResponse:
    if not allowed(request):
        return HttpResponse("metrics: send the scrape token or scrape from an allowed address\n", status=403,
                            content_type="text/plain")
    body = generate_latest(_registry) + generate_latest(CYCLE_REGISTRY)
    return HttpResponse(body, content_type=CONTENT_TYPE_LATEST)
