"""Console pages for API users: personal API tokens, and what a job page offers scripts
("Copy as CLI / YAML", the GPU utilisation chart from NVML samples)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import plotly.graph_objects as go
import yaml
from django.contrib import messages
from django.contrib.auth.mixins import LoginRequiredMixin
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views import View

from console.charts import _layout, figure_json
from scheduler.models import Job
from scheduler.selectors.gpu import job_gpu_samples
from scheduler.selectors.submission import job_cli_command, job_submission
from scheduler.selectors.tokens import user_tokens
from scheduler.services.tokens import token_create, token_revoke

EXPIRY_CHOICES = [("", "Never"), ("7", "7 days"), ("30", "30 days"), ("90", "90 days"), ("365", "1 year")]


class TokenListView(LoginRequiredMixin, View):
    """GET: the user's tokens (prefix only); POST: a new token, whose secret is shown this once."""

    template_name = "console/tokens.html"

    def _render(self, request: HttpRequest, **extra: Any) -> HttpResponse:
        context = {"tokens": user_tokens(user=request.user), "expiry_choices": EXPIRY_CHOICES,
                   "now": timezone.now(), "errors": {}, **extra}
        return render(request, self.template_name, context, status=400 if extra.get("errors") else 200)

    def get(self, request: HttpRequest) -> HttpResponse:
        return self._render(request)

    def post(self, request: HttpRequest) -> HttpResponse:
        days = request.POST.get("expires_days", "")
        if days and not (days.isascii() and days.isdigit()):  # "²".isdigit() is true, and int("²") raises
            return self._render(request, errors={"expires_at": ["Pick an expiry from the list."]})
        expires_at = timezone.now() + timedelta(days=int(days)) if days else None
        try:
            created = token_create(user=request.user, name=request.POST.get("name", ""), expires_at=expires_at)
        except ValidationError as error:
            return self._render(request, errors=error.message_dict, name=request.POST.get("name", ""))
        return self._render(request, new_token=created)


class TokenRevokeView(LoginRequiredMixin, View):
    def post(self, request: HttpRequest, pk: int) -> HttpResponse:
        try:
            token = token_revoke(user=request.user, token_id=pk)
        except ValidationError as error:
            messages.error(request, "; ".join(error.messages))
        else:
            messages.success(request, f"Token {token.name} ({token.prefix}…) is revoked: it no longer works.")
        return redirect("console:tokens")


def gpu_figure(job: Job) -> str | None:
    """Utilisation and memory per GPU of the job over time; None without samples (no NVML: nothing faked)."""
    points = job_gpu_samples(job=job, since=timezone.now() - timedelta(hours=24))
    if not points:
        return None
    figure = go.Figure()
    series: dict[tuple[int, int], list] = {}
    for point in points:
        series.setdefault((point.pod_id, point.gpu_index), []).append(point)
    for (pod_id, index), rows in sorted(series.items()):
        times = [row.time for row in rows]
        label = f"pod {pod_id} GPU {index}"
        figure.add_trace(go.Scatter(x=times, y=[row.utilization_percent for row in rows], name=f"{label} util %",
                                    mode="lines"))
        figure.add_trace(go.Scatter(x=times, y=[100.0 * row.memory_used_mib / max(1, row.memory_total_mib)
                                                for row in rows], name=f"{label} memory %", mode="lines",
                                    line={"dash": "dot"}))
    layout = _layout("GPU utilisation and memory (NVML)", yaxis_title="%")
    layout["yaxis"]["range"] = [0, 100]
    figure.update_layout(**layout)
    return figure_json(figure)


def job_api_context(job: Job) -> dict[str, Any]:
    """The job page's "Copy as CLI / YAML" texts and GPU chart."""
    return {
        "copy_cli": job_cli_command(job),
        "copy_yaml": yaml.safe_dump(job_submission(job), sort_keys=False, allow_unicode=True),
        "gpu_figure": gpu_figure(job),
    }
