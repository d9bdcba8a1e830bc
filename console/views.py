"""Console pages. Thin: reads through scheduler.selectors, writes through scheduler.services.

Live pages render their changing part from one partial; with `?fragment=1` a view returns just
that partial, which is what the browser fetches when the cluster socket says something changed.
"""

from __future__ import annotations

import logging
from dataclasses import asdict
from datetime import timedelta
from typing import Any

from django.contrib import messages
from django.contrib.auth.mixins import LoginRequiredMixin, UserPassesTestMixin
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404, redirect, render
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils import timezone
from django.views import View

from console import charts
from console.api_pages import job_api_context
from console.cluster_forms import QuotaForm, WorkspaceForm
from console.forms import (
    IDLE_MODE_HELP,
    JobSubmitForm,
    apply_service_errors,
    role_errors_beside_form_errors,
    role_formset,
)
from console.models import SubmissionToken
from console.tables import (
    SORT_CHOICES,
    STATUS_FILTER_CHOICES,
    JobListQuery,
    build_page,
)
from scheduler.models import IdleMode, Job, Node, ResourceQuota, Workspace
from scheduler.publish import publish_cluster_change_on_commit
from scheduler.selectors import (
    dashboard_summary,
    job_detail,
    job_for_user,
    node_grid,
    preemption_costs,
    quota_tree,
    user_quotas,
    user_workspaces,
    workspaces_overview,
)
from scheduler.selectors.inventory import inventory_warnings
from scheduler.services.jobs import job_can_restart, job_can_stop, job_restart, job_stop, job_submit
from scheduler.services.lifecycle import grace_seconds
from scheduler.services.nodes import node_drain, node_set_schedulable
from scheduler.services.quotas import quota_create, quota_delete, quota_update
from scheduler.states import FINAL_JOB_STATUSES, LIVE_POD_STATUSES, JobStatus
from scheduler.validation import parse_id

log = logging.getLogger("tidepool.console")


class StaffRequiredMixin(LoginRequiredMixin, UserPassesTestMixin):
    """Quota, workspace and node management: staff only (others get 403, anonymous users the login page)."""

    def test_func(self) -> bool:
        return bool(self.request.user.is_staff)


def wants_fragment(request: HttpRequest) -> bool:
    return request.GET.get("fragment") == "1"


# ------------------------------------------------------------------------------------ dashboard


class DashboardView(LoginRequiredMixin, View):
    template_name = "console/dashboard.html"
    fragment_template = "console/_dashboard_live.html"

    def get(self, request: HttpRequest) -> HttpResponse:
        now = timezone.now()
        pools = []
        for usage in quota_tree():
            if usage.depth == 0:
                pools.append(usage)
        preemptions_json, preemptions_24h = charts.preemptions_figure(now)
        queue_json, median_wait = charts.queue_wait_figure(now)
        context = {
            **asdict(dashboard_summary(user=request.user)),
            "pools": pools,
            "allocation_charts": charts.pool_allocation_figures(now),
            "preemptions_json": preemptions_json,
            "preemptions_24h": preemptions_24h,
            "queue_json": queue_json,
            "median_wait": median_wait,
            "week": preemption_costs(since=now - timedelta(days=7)),
            "inventory_warnings": inventory_warnings(now=now),
        }
        return render(request, self.fragment_template if wants_fragment(request) else self.template_name, context)


# ------------------------------------------------------------------------------------------ jobs


# The job list's legend: the three statuses people mistake for one another.
STATUS_LEGEND: list[tuple[str, str]] = [
    (JobStatus.RUNNING, "its pods run"),
    (JobStatus.PREEMPTED, "reclaimed for a quota's owner — not a failure; with fault tolerance it resumes by itself"),
    (JobStatus.FAILED, "an instance failed with no restart left"),
]


class JobListView(LoginRequiredMixin, View):
    template_name = "console/job_list.html"

    def get(self, request: HttpRequest) -> HttpResponse:
        query = JobListQuery.from_params(request.GET)
        page = build_page(user=request.user, query=query)
        workspaces = list(user_workspaces(user=request.user).order_by("name"))
        context = {
            "page": page,
            "query": query,
            "workspaces": workspaces,
            "quotas": list(user_quotas(user=request.user)),
            "status_choices": STATUS_FILTER_CHOICES,
            "sort_choices": SORT_CHOICES,
            "idle_choices": IdleMode.choices,
            "live_query": query.urlencode(),
            "status_legend": STATUS_LEGEND,
        }
        return render(request, self.template_name, context)


class JobSubmitView(LoginRequiredMixin, View):
    template_name = "console/job_form.html"

    def get(self, request: HttpRequest) -> HttpResponse:
        initial: dict[str, Any] = {}
        roles_initial: list[dict[str, Any]] = [{}]
        clone_of = None
        clone_id = request.GET.get("clone")
        if clone_id:
            clone_of = job_detail(user=request.user, job_id=_int_or_404(clone_id))
            if clone_of is None:
                raise Http404("No such job.")
            initial = JobSubmitForm.initial_from_job(clone_of)
            roles_initial = [
                {
                    "name": role.name,
                    "pod_count": role.pod_count,
                    "gpu_type": role.gpu_type,
                    "gpus": role.gpus,
                    "cpu_only": role.cpu_only,
                    "cpu": role.cpu,
                    "memory_gib": role.memory_gib,
                    "shared_memory_gib": role.shared_memory_gib,
                }
                for role in clone_of.roles.all()
            ]
        else:
            first_workspace = user_workspaces(user=request.user).order_by("name").first()
            if first_workspace is not None:
                initial["workspace"] = first_workspace.pk
        form = JobSubmitForm(user=request.user, initial=initial)
        formset = role_formset(initial=roles_initial)
        return self._render(request, form, formset, clone_of=clone_of)

    def post(self, request: HttpRequest) -> HttpResponse:
        form = JobSubmitForm(request.POST, user=request.user)
        formset = role_formset(request.POST)
        if not (form.is_valid() & formset.is_valid()):  # both, so every error shows at once
            role_errors = role_errors_beside_form_errors(form, formset)
            return self._render(request, form, formset, role_errors=role_errors, status=400)
        token = form.cleaned_data["token"]
        replayed = self._job_of_token(token, request)
        if replayed is not None:
            return redirect("console:job_detail", pk=replayed)
        try:
            with transaction.atomic():
                # The unique token row is taken first: a second POST of the same form waits here
                # for this transaction, then fails on the constraint and is sent to this job.
                SubmissionToken.objects.create(token=token, user=request.user)
                job = job_submit(**form.service_kwargs(formset.service_roles()))
                SubmissionToken.objects.filter(token=token).update(job=job)
                SubmissionToken.prune()
        except IntegrityError:
            replayed = self._job_of_token(token, request)
            if replayed is not None:
                return redirect("console:job_detail", pk=replayed)
            form.add_error(None, "This form was already submitted. Reload the page to submit a new job.")
            return self._render(request, form, formset, status=409)
        except ValidationError as error:
            role_errors = apply_service_errors(error, form, formset)
            return self._render(request, form, formset, role_errors=role_errors, status=400)
        messages.success(request, f"Job {job.name} submitted to quota {job.quota.name}.")
        return redirect("console:job_detail", pk=job.pk)

    @staticmethod
    def _job_of_token(token: Any, request: HttpRequest) -> int | None:
        return (
            SubmissionToken.objects.filter(token=token, user=request.user, job__isnull=False)
            .values_list("job_id", flat=True)
            .first()
        )

    def _render(
        self,
        request: HttpRequest,
        form: JobSubmitForm,
        formset: Any,
        *,
        clone_of: Job | None = None,
        role_errors: list[str] | None = None,
        status: int = 200,
    ) -> HttpResponse:
        context = {
            "form": form,
            "formset": formset,
            "clone_of": clone_of,
            "role_errors": [*formset.non_form_errors(), *(role_errors or [])],
            "idle_help": IDLE_MODE_HELP,
            "selected_quota": form.selected_quota_id(),
        }
        return render(request, self.template_name, context, status=status)


def _int_or_404(value: str) -> int:
    number = parse_id(value)
    if number is None:
        raise Http404("No such job.")
    return number


def job_live_context(job: Job) -> dict[str, Any]:
    """What the live part of a job's page shows; the page and the job consumer both use it."""
    pods = list(job.pods.all())
    attempts: dict[int, list] = {}
    for pod in pods:
        attempts.setdefault(pod.attempt, []).append(pod)
    live_pods = any(pod.status in LIVE_POD_STATUSES for pod in pods)
    return {
        "job": job,
        "attempts": sorted(attempts.items(), reverse=True),
        "events": list(job.events.all()),
        "preemptions": list(job.preemptions.all()),
        "grace_s": grace_seconds(job),
        "progress": job.progress or {},
        "can_stop": job_can_stop(job),
        "can_restart": job_can_restart(job, has_live_pods=live_pods),
        "is_final": job.status in FINAL_JOB_STATUSES,
    }


def render_job_live(job: Job) -> str:
    return render_to_string("console/_job_live.html", job_live_context(job))


class JobDetailView(LoginRequiredMixin, View):
    template_name = "console/job_detail.html"

    def get(self, request: HttpRequest, pk: int) -> HttpResponse:
        job = job_detail(user=request.user, job_id=pk)
        if job is None:
            raise Http404("No such job, or it belongs to a workspace you are not a member of.")
        pods = list(job.pods.all())
        context = {
            **job_live_context(job),
            "roles": list(job.roles.all()),
            "log_pods": pods,
            "idle_help": IDLE_MODE_HELP.get(job.idle_mode, ""),
            **job_api_context(job),  # Copy as CLI / YAML, GPU chart (console/api_pages.py)
        }
        return render(request, self.template_name, context)


class JobActionView(LoginRequiredMixin, View):
    """Stop or restart with confirmation: GET shows the question, POST does it."""

    action = ""
    template_name = "console/job_confirm.html"

    def _job(self, request: HttpRequest, pk: int) -> Job:
        job = job_for_user(user=request.user, job_id=pk)
        if job is None:
            raise Http404("No such job, or it belongs to a workspace you are not a member of.")
        return job

    def get(self, request: HttpRequest, pk: int) -> HttpResponse:
        return render(request, self.template_name, {"job": self._job(request, pk), "action": self.action})

    def post(self, request: HttpRequest, pk: int) -> HttpResponse:
        job = self._job(request, pk)
        try:
            if self.action == "stop":
                job_stop(job=job, user=request.user)
                messages.success(request, f"Stopping {job.name}: its pods get SIGTERM and the grace period.")
            else:
                job_restart(job=job, user=request.user)
                messages.success(request, f"{job.name} is queuing again; it resumes from its checkpoint directory.")
        except ValidationError as error:
            for message in error.messages:
                messages.error(request, message)
        return redirect("console:job_detail", pk=job.pk)


# ---------------------------------------------------------------------------------------- quotas


class QuotaListView(LoginRequiredMixin, View):
    template_name = "console/quota_list.html"
    fragment_template = "console/_quotas_live.html"

    def get(self, request: HttpRequest) -> HttpResponse:
        tree = quota_tree()
        context = {
            "tree": tree,
            "usage_chart": charts.quota_usage_figure(tree),
            "workspaces": list(workspaces_overview()) if request.user.is_staff else [],
        }
        return render(request, self.fragment_template if wants_fragment(request) else self.template_name, context)


class QuotaFormView(StaffRequiredMixin, View):
    template_name = "console/quota_form.html"

    def get(self, request: HttpRequest, pk: int | None = None) -> HttpResponse:
        quota = get_object_or_404(ResourceQuota, pk=pk) if pk else None
        initial = None
        if quota is None and request.GET.get("parent"):
            parent = ResourceQuota.objects.filter(pk=_int_or_404(request.GET["parent"])).first()
            if parent is not None:
                initial = {"parent": parent.pk, "resource_type": parent.resource_type}
        form = QuotaForm(instance=quota, **({"initial": initial} if initial else {}))
        return render(request, self.template_name, {"form": form, "quota": quota})

    def post(self, request: HttpRequest, pk: int | None = None) -> HttpResponse:
        quota = get_object_or_404(ResourceQuota, pk=pk) if pk else None
        form = QuotaForm(request.POST, instance=quota)
        if form.is_valid():
            try:
                fields = form.service_fields()
                spaces = form.cleaned_data["workspaces"]
                if quota is None:
                    quota = quota_create(workspaces=spaces, **fields)
                    messages.success(request, f"Quota {quota.name} created.")
                else:
                    quota = quota_update(quota=quota, workspaces=spaces, **fields)
                    messages.success(request, f"Quota {quota.name} saved.")
                return redirect("console:quotas")
            except ValidationError as error:
                apply_service_errors(error, form)
        return render(request, self.template_name, {"form": form, "quota": quota}, status=400)


class QuotaDeleteView(StaffRequiredMixin, View):
    template_name = "console/quota_delete.html"

    def get(self, request: HttpRequest, pk: int) -> HttpResponse:
        return render(request, self.template_name, {"quota": get_object_or_404(ResourceQuota, pk=pk)})

    def post(self, request: HttpRequest, pk: int) -> HttpResponse:
        quota = get_object_or_404(ResourceQuota, pk=pk)
        try:
            quota_delete(quota=quota)
        except ValidationError as error:
            return render(request, self.template_name, {"quota": quota, "errors": error.messages}, status=400)
        messages.success(request, f"Quota {quota.name} deleted.")
        return redirect("console:quotas")


class WorkspaceFormView(StaffRequiredMixin, View):
    template_name = "console/workspace_form.html"

    def get(self, request: HttpRequest, pk: int | None = None) -> HttpResponse:
        workspace = get_object_or_404(Workspace, pk=pk) if pk else None
        return render(request, self.template_name, {"form": WorkspaceForm(instance=workspace), "workspace": workspace})

    def post(self, request: HttpRequest, pk: int | None = None) -> HttpResponse:
        workspace = get_object_or_404(Workspace, pk=pk) if pk else None
        form = WorkspaceForm(request.POST, instance=workspace)
        if form.is_valid():
            # No cross-row invariant involves a workspace: its name, members and quota links are
            # saved as they are, and the quota pages hear about it like any cluster change.
            with transaction.atomic():
                saved = form.save()
                saved.quotas.set(form.cleaned_data["quotas"])
                publish_cluster_change_on_commit()
            messages.success(request, f"Workspace {saved.name} saved.")
            return redirect(reverse("console:quotas") + "#workspaces")
        return render(request, self.template_name, {"form": form, "workspace": workspace}, status=400)


# ----------------------------------------------------------------------------------------- nodes


class NodeListView(LoginRequiredMixin, View):
    template_name = "console/node_list.html"
    fragment_template = "console/_nodes_live.html"

    def get(self, request: HttpRequest) -> HttpResponse:
        grids = node_grid(user=request.user)
        pools: dict[str, list] = {}
        for grid in grids:
            pools.setdefault(grid.node.get_resource_type_display(), []).append(grid)
        context = {"pools": pools, "now": timezone.now(), "inventory_warnings": inventory_warnings()}
        return render(request, self.fragment_template if wants_fragment(request) else self.template_name, context)


class NodeActionView(StaffRequiredMixin, View):
    """cordon / uncordon / drain. Drain asks for confirmation first (it restarts the node's jobs)."""

    template_name = "console/node_confirm.html"
    actions = ("cordon", "uncordon", "drain")

    def get(self, request: HttpRequest, pk: int, action: str) -> HttpResponse:
        if action not in self.actions:
            raise Http404(action)
        node = get_object_or_404(Node, pk=pk)
        return render(request, self.template_name, {"node": node, "action": action})

    def post(self, request: HttpRequest, pk: int, action: str) -> HttpResponseRedirect:
        if action not in self.actions:
            raise Http404(action)
        node = get_object_or_404(Node, pk=pk)
        try:
            if action == "drain":
                node_drain(node=node)
                messages.success(request, f"Draining {node.name}: cordoned, and its jobs restart elsewhere.")
            else:
                node_set_schedulable(node=node, schedulable=action == "uncordon")
                verb = "uncordoned: new pods may be placed there" if action == "uncordon" else (
                    "cordoned: running pods stay, nothing new is placed there"
                )
                messages.success(request, f"{node.name} {verb}.")
        except ValidationError as error:
            for message in error.messages:
                messages.error(request, message)
        return redirect(reverse("console:nodes") + f"#node-{node.name}")
