"""Django admin: enough for an operator with no other tool. Writes go through the services."""

from __future__ import annotations

from django import forms
from django.contrib import admin
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils.html import format_html

from scheduler.models import (
    Job,
    JobEvent,
    JobRole,
    Node,
    Pod,
    PoolPolicy,
    ResourceQuota,
    ResourceType,
    Workspace,
)
from scheduler.services.nodes import node_drain, node_register, node_set_schedulable
from scheduler.services.quotas import quota_create, quota_update


@admin.register(Workspace)
class WorkspaceAdmin(admin.ModelAdmin):
    list_display = ("name", "description", "member_count", "quota_names")
    filter_horizontal = ("members",)
    search_fields = ("name",)

    @admin.display(description="members")
    def member_count(self, obj: Workspace) -> int:
        return obj.members.count()

    @admin.display(description="quotas")
    def quota_names(self, obj: Workspace) -> str:
        return ", ".join(q.name for q in obj.quotas.all())


class _DryRun(Exception):
    pass


def dry_run(form: forms.ModelForm, write) -> None:
    """Run the service in a transaction that is rolled back, so its refusals show at the form's fields."""
    try:
        with transaction.atomic():
            write()
            raise _DryRun
    except _DryRun:
        pass
    except ValidationError as error:
        for field, field_messages in error.message_dict.items():
            target = field if field in form.fields else None
            for message in field_messages:
                form.add_error(target, message)


class QuotaAdminForm(forms.ModelForm):
    """Empty resource type: the parent's pool (DESIGN §2); empty min CPU or memory: in proportion to the
    min GPUs (the pool's CPU and memory per GPU). The quota services decide both."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        pool = self.fields["resource_type"]
        pool.required = False
        pool.choices = [("", "— the parent's (a root: general) —"), *ResourceType.choices]
        pool.help_text = "A child quota is in its parent's pool: leave it empty, or state the same."
        if self.instance.pk is None:
            pool.initial = ""
        for name in ("min_cpu", "min_memory_gib"):
            self.fields[name].required = False
            self.fields[name].help_text = "Empty: in proportion to the min GPUs (the pool's share per GPU)."
            if self.instance.pk is None:
                self.fields[name].initial = None

    def clean(self):
        data = super().clean()
        if self.errors:
            return data
        fields = {k: v for k, v in data.items() if k != "workspaces"}
        if self.instance.pk:
            dry_run(self, lambda: quota_update(quota=ResourceQuota.objects.get(pk=self.instance.pk), **fields))
        else:
            dry_run(self, lambda: quota_create(**fields))
        return data

    class Meta:
        model = ResourceQuota
        fields = [
            "name", "description", "parent", "resource_type", "min_gpus", "min_cpu", "min_memory_gib",
            "max_gpus", "max_cpu", "max_memory_gib", "preempt_within", "workspaces",
        ]
        help_texts = {
            "min_gpus": 'Guaranteed GPUs per model, e.g. {"A100": 8}.',
            "max_gpus": 'Ceiling per model, e.g. {"A100": 16}; empty: GPUs not capped.',
        }


@admin.register(PoolPolicy)
class PoolPolicyAdmin(admin.ModelAdmin):
    """Per pool opt-in policies (DESIGN §2b); the scheduling loop reads them every cycle."""

    list_display = ("resource_type", "idle_share", "min_runtime_s", "starvation_s", "starvation_hold",
                    "starved_min_runtime_s", "default_time_limit_s", "grow_interval_s")
    fields = ("resource_type", "idle_share", "min_runtime_s", "starvation_s", "starvation_hold",
              "starved_min_runtime_s", "default_time_limit_s", "grow_interval_s")


def _quota_depth(quota: ResourceQuota) -> int:
    depth, node = 0, quota
    while node.parent_id is not None:
        depth += 1
        node = node.parent
    return depth


@admin.register(ResourceQuota)
class ResourceQuotaAdmin(admin.ModelAdmin):
    form = QuotaAdminForm
    list_display = ("tree_name", "resource_type", "min_display", "max_display", "workspace_names")
    list_filter = ("resource_type",)
    filter_horizontal = ("workspaces",)
    search_fields = ("name",)

    def get_queryset(self, request):
        return super().get_queryset(request).select_related("parent").prefetch_related("workspaces")

    def get_changelist_instance(self, request):
        changelist = super().get_changelist_instance(request)
        # Show the tree: each root followed by its descendants, depth-first.
        rows = list(changelist.result_list)
        children: dict[int | None, list[ResourceQuota]] = {}
        for quota in rows:
            children.setdefault(quota.parent_id, []).append(quota)
        ordered: list[ResourceQuota] = []

        def walk(parent_id: int | None) -> None:
            for quota in sorted(children.get(parent_id, []), key=lambda q: (q.resource_type, q.name)):
                ordered.append(quota)
                walk(quota.pk)

        walk(None)
        seen = {q.pk for q in ordered}
        ordered += [q for q in rows if q.pk not in seen]  # filtered views: parents may be absent
        changelist.result_list = ordered
        return changelist

    @admin.display(description="quota")
    def tree_name(self, obj: ResourceQuota) -> str:
        depth = _quota_depth(obj)
        return format_html("{}{}{}", "\u2003" * depth, "└ " if depth else "", obj.name)

    @admin.display(description="min")
    def min_display(self, obj: ResourceQuota) -> str:
        gpus = ", ".join(f"{n} {m}" for m, n in (obj.min_gpus or {}).items()) or "0 GPUs"
        return f"{gpus}; {obj.min_cpu:g} CPU; {obj.min_memory_gib:g} GiB"

    @admin.display(description="max")
    def max_display(self, obj: ResourceQuota) -> str:
        if not obj.has_max:
            return "—"
        parts = [", ".join(f"{n} {m}" for m, n in (obj.max_gpus or {}).items()) or "GPUs uncapped"]
        parts.append(f"{obj.max_cpu:g} CPU" if obj.max_cpu is not None else "CPU uncapped")
        parts.append(f"{obj.max_memory_gib:g} GiB" if obj.max_memory_gib is not None else "memory uncapped")
        return "; ".join(parts)

    @admin.display(description="workspaces")
    def workspace_names(self, obj: ResourceQuota) -> str:
        return ", ".join(w.name for w in obj.workspaces.all())

    def save_model(self, request, obj, form, change):
        # The services enforce the tree's invariants (already checked by the form's dry run).
        fields = {k: v for k, v in form.cleaned_data.items() if k != "workspaces"}
        if change:
            saved = quota_update(quota=ResourceQuota.objects.get(pk=obj.pk), **fields)
        else:
            saved = quota_create(**fields)
        obj.pk = saved.pk
        form.instance = saved

    def save_related(self, request, form, formsets, change):
        quota = ResourceQuota.objects.get(pk=form.instance.pk)
        quota_update(quota=quota, workspaces=form.cleaned_data.get("workspaces", []))


class NodeAdminForm(forms.ModelForm):
    def clean(self):
        data = super().clean()
        if not self.errors:
            dry_run(self, lambda: node_register(**self._register_fields(data)))
        return data

    @staticmethod
    def _register_fields(data: dict) -> dict:
        keys = ("name", "resource_type", "gpu_type", "gpu_count", "cpu", "memory_gib", "address", "inventory_source")
        return {key: data[key] for key in keys if key in data}

    class Meta:
        model = Node
        fields = ["name", "resource_type", "gpu_type", "gpu_count", "cpu", "memory_gib", "address",
                  "schedulable", "inventory_source"]


@admin.register(Node)
class NodeAdmin(admin.ModelAdmin):
    form = NodeAdminForm
    list_display = (
        "name", "resource_type", "gpu_type", "gpu_count", "cpu", "memory_gib", "state", "last_heartbeat",
        "inventory_source",
    )
    list_filter = ("resource_type", "gpu_type", "schedulable", "lost")
    search_fields = ("name", "address")
    actions = ["cordon", "uncordon", "drain"]
    readonly_fields = ("last_heartbeat", "lost", "draining")

    @admin.display(description="state")
    def state(self, obj: Node) -> str:
        if obj.lost:
            return "lost"
        if obj.draining:
            return "draining"
        return "ready" if obj.schedulable else "cordoned"

    def save_model(self, request, obj, form, change):
        saved = node_register(**NodeAdminForm._register_fields(form.cleaned_data))
        if saved.schedulable != form.cleaned_data.get("schedulable", True):
            node_set_schedulable(node=saved, schedulable=form.cleaned_data["schedulable"])
        obj.pk = saved.pk

    @admin.action(description="Cordon: place nothing new on the selected nodes")
    def cordon(self, request, queryset):
        for node in queryset:
            node_set_schedulable(node=node, schedulable=False)
        self.message_user(request, f"Cordoned {queryset.count()} node(s).")

    @admin.action(description="Uncordon the selected nodes")
    def uncordon(self, request, queryset):
        for node in queryset:
            node_set_schedulable(node=node, schedulable=True)
        self.message_user(request, f"Uncordoned {queryset.count()} node(s).")

    @admin.action(description="Drain: cordon and move running jobs elsewhere")
    def drain(self, request, queryset):
        for node in queryset:
            node_drain(node=node)
        self.message_user(request, f"Draining {queryset.count()} node(s).")


class JobRoleInline(admin.TabularInline):
    model = JobRole
    extra = 0
    can_delete = False
    readonly_fields = ("name", "pod_count", "gpu_type", "gpus", "cpu_only", "cpu", "memory_gib", "shared_memory_gib")
    fields = readonly_fields

    def has_add_permission(self, request, obj=None):
        return False


class PodInline(admin.TabularInline):
    model = Pod
    extra = 0
    can_delete = False
    fields = ("role", "index", "rank", "attempt", "node", "gpu_indices", "status", "exit_code", "reason")
    readonly_fields = fields

    def has_add_permission(self, request, obj=None):
        return False


class JobEventInline(admin.TabularInline):
    model = JobEvent
    extra = 0
    can_delete = False
    fields = ("time", "kind", "reason", "staff_reason")
    readonly_fields = fields

    def has_add_permission(self, request, obj=None):
        return False


@admin.register(Job)
class JobAdmin(admin.ModelAdmin):
    """Read-mostly: jobs are submitted and stopped through the console or the API."""

    list_display = ("name", "workspace", "quota", "status", "in_quota", "idle_mode", "priority", "restart_count",
                    "preemption_count", "queue_time")
    list_filter = ("status", "idle_mode", "in_quota", "quota", "workspace")
    search_fields = ("name",)
    inlines = [JobRoleInline, PodInline, JobEventInline]
    readonly_fields = [f.name for f in Job._meta.fields]

    def has_add_permission(self, request):
        return False
