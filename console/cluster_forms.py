"""Forms staff use to set up the cluster: quotas (the tree), workspaces, pool policies (DESIGN §2b).

Like console/forms.py they parse what the browser sends; the services decide what is allowed
(the quota tree's invariants in `scheduler/services/quotas.py`, policy bounds in
`scheduler/services/pool_policies.py`) and `apply_service_errors` puts a refusal at its field.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django import forms
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError

from console.fields import AsciiDecimalField, AsciiIntegerField
from scheduler import validation as v
from scheduler.models import PoolPolicy, ResourceQuota, ResourceType, Workspace
from scheduler.selectors import gpu_models_by_pool
from scheduler.selectors.pools import PoolPolicyRow
from scheduler.services.quotas import pool_share_per_gpu


class GpuCountsWidget(forms.MultiWidget):
    """One number input per GPU model."""

    template_name = "console/widgets/gpu_counts.html"

    def __init__(self, models: list[str], attrs: dict[str, Any] | None = None) -> None:
        self.models = models
        widgets = [forms.NumberInput(attrs={"min": 0, "step": 1, "aria-label": model}) for model in models]
        super().__init__(widgets, attrs)

    def decompress(self, value: Mapping[str, int] | None) -> list[Any]:
        value = value or {}
        return [value.get(model) for model in self.models]

    def get_context(self, name: str, value: Any, attrs: dict[str, Any] | None) -> dict[str, Any]:
        context = super().get_context(name, value, attrs)
        for model, sub in zip(self.models, context["widget"]["subwidgets"], strict=True):
            sub["model"] = model
        return context


class GpuCountsField(forms.MultiValueField):
    """GPUs per model as {"A100": 8}. With `uncapped_when_empty`, an empty model is left out (not capped)
    and all-empty means None (no GPU max at all)."""

    def __init__(self, models: list[str], *, uncapped_when_empty: bool, **kwargs: Any) -> None:
        self.models = models
        self.uncapped_when_empty = uncapped_when_empty
        fields = [AsciiIntegerField(min_value=0, max_value=v.MAX_QUOTA_GPUS, required=False) for _ in models]
        super().__init__(fields, widget=GpuCountsWidget(models), require_all_fields=False, required=False, **kwargs)

    def compress(self, values: list[int | None]) -> dict[str, int] | None:
        counts = {model: value for model, value in zip(self.models, values or [], strict=False) if value is not None}
        if self.uncapped_when_empty:
            return counts or None
        return counts


def _quota_models(quota: ResourceQuota | None) -> list[str]:
    models = {model for names in gpu_models_by_pool().values() for model in names}
    if quota is not None:
        models |= set(quota.min_gpus or {}) | set(quota.max_gpus or {})
    return sorted(models)


def _pool_shares_text() -> dict[str, str]:
    """The pools' CPU cores and memory per GPU, as the quota form says them."""
    cpu, memory = [], []
    for pool, label in ResourceType.choices:
        cores, gib = pool_share_per_gpu(pool)
        if cores or gib:
            cpu.append(f"{label}: {cores.normalize():f} cores per GPU")
            memory.append(f"{label}: {gib.normalize():f} GiB per GPU")
    none = "no GPU nodes yet: 0"
    return {"cpu": "; ".join(cpu) or none, "memory": "; ".join(memory) or none}


class QuotaForm(forms.Form):
    """A quota of the tree. The tree's invariants (children within the parent, min ≤ max, one pool
    per tree, GPU models of the pool) are checked by the quota services."""

    name = forms.SlugField(max_length=v.NAME_LENGTHS["quota"], help_text=v.name_rule("quota"))
    description = forms.CharField(max_length=200, required=False)
    resource_type = forms.ChoiceField(
        label="Resource type", choices=[("", "— the parent's (a root: General) —"), *ResourceType.choices],
        required=False, help_text="A child quota is in its parent's pool: leave it empty, or state the same.",
    )
    parent = forms.ModelChoiceField(queryset=ResourceQuota.objects.none(), required=False, empty_label="— root —")
    min_cpu = AsciiDecimalField(label="Min CPU cores", min_value=0, max_digits=10, decimal_places=3, required=False)
    min_memory_gib = AsciiDecimalField(
        label="Min memory (GiB)", min_value=0, max_digits=12, decimal_places=3, required=False
    )
    max_cpu = AsciiDecimalField(
        label="Max CPU cores", min_value=0, max_digits=10, decimal_places=3, required=False,
        help_text="Empty: not capped.",
    )
    max_memory_gib = AsciiDecimalField(
        label="Max memory (GiB)", min_value=0, max_digits=12, decimal_places=3, required=False,
        help_text="Empty: not capped.",
    )
    preempt_within = forms.BooleanField(
        label="Priority preemption inside the quota", required=False,
        help_text="The guarantee goes to this quota's highest-priority work: a job that does not fit its min first "
        "moves the quota's own lower-priority jobs to idle resources (they keep running, Not in Quota, and come "
        "back In Quota when it fits again), then may preempt them. Jobs of child quotas are not affected.",
    )
    workspaces = forms.ModelMultipleChoiceField(
        queryset=Workspace.objects.none(), required=False, widget=forms.CheckboxSelectMultiple,
        help_text="Members of these workspaces can submit jobs to this quota.",
    )

    def __init__(self, *args: Any, instance: ResourceQuota | None = None, **kwargs: Any) -> None:
        self.instance = instance
        if instance is not None and "initial" not in kwargs:
            kwargs["initial"] = {
                "name": instance.name,
                "description": instance.description,
                "resource_type": instance.resource_type,
                "parent": instance.parent_id,
                "min_gpus": instance.min_gpus,
                "min_cpu": instance.min_cpu,
                "min_memory_gib": instance.min_memory_gib,
                "max_gpus": instance.max_gpus,
                "max_cpu": instance.max_cpu,
                "max_memory_gib": instance.max_memory_gib,
                "preempt_within": instance.preempt_within,
                "workspaces": list(instance.workspaces.values_list("pk", flat=True)),
            }
        super().__init__(*args, **kwargs)
        models = _quota_models(instance)
        shares = _pool_shares_text()
        self.fields["min_cpu"].help_text = f"Empty: in proportion to its min GPUs ({shares['cpu']})."
        self.fields["min_memory_gib"].help_text = f"Empty: in proportion to its min GPUs ({shares['memory']})."
        self.fields["min_gpus"] = GpuCountsField(
            models, uncapped_when_empty=False, label="Min GPUs (guaranteed)",
            help_text="A model left empty counts as 0.",
        )
        self.fields["max_gpus"] = GpuCountsField(
            models, uncapped_when_empty=True, label="Max GPUs", help_text="A model left empty is not capped."
        )
        # Keep the fields in reading order: GPUs next to the other min / max fields.
        order = ["name", "description", "resource_type", "parent", "min_gpus", "min_cpu", "min_memory_gib",
                 "max_gpus", "max_cpu", "max_memory_gib", "preempt_within", "workspaces"]
        self.order_fields(order)
        parents = ResourceQuota.objects.order_by("resource_type", "name")
        if instance is not None:
            parents = parents.exclude(pk=instance.pk)
        self.fields["parent"].queryset = parents
        self.fields["workspaces"].queryset = Workspace.objects.order_by("name")

    def clean_name(self) -> str:
        problem = v.name_problem(self.cleaned_data["name"], "quota")
        if problem:
            raise ValidationError(problem)
        return self.cleaned_data["name"]

    def service_fields(self) -> dict[str, Any]:
        data = self.cleaned_data
        return {
            "name": data["name"],
            "description": data["description"],
            "resource_type": data["resource_type"],
            "parent": data["parent"],
            "min_gpus": data["min_gpus"] or {},
            "min_cpu": data["min_cpu"],  # None: in proportion to the GPUs (the quota services)
            "min_memory_gib": data["min_memory_gib"],
            "max_gpus": data["max_gpus"],
            "max_cpu": data["max_cpu"],
            "max_memory_gib": data["max_memory_gib"],
            "preempt_within": data["preempt_within"],
        }


class WorkspaceForm(forms.ModelForm):
    """A workspace, its members and the quotas its members may submit to."""

    quotas = forms.ModelMultipleChoiceField(
        queryset=ResourceQuota.objects.none(), required=False, widget=forms.CheckboxSelectMultiple,
        help_text="Members submit jobs to these quotas.",
    )

    class Meta:
        model = Workspace
        fields = ["name", "description", "members"]
        widgets = {"members": forms.CheckboxSelectMultiple}

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["members"].queryset = get_user_model().objects.order_by("username")
        self.fields["quotas"].queryset = ResourceQuota.objects.order_by("resource_type", "name")
        if self.instance.pk:
            self.fields["quotas"].initial = list(self.instance.quotas.values_list("pk", flat=True))

    def clean_name(self) -> str:
        problem = v.name_problem(self.cleaned_data["name"], "workspace")
        if problem:
            raise ValidationError(problem)
        return self.cleaned_data["name"]


# ---------------------------------------------------------------------------------- pool policies

SECONDS_ATTRS = {"min": 0, "max": v.MAX_POLICY_SECONDS, "step": 1, "inputmode": "numeric"}


class PoolPolicyForm(forms.Form):
    """One pool's policies. It parses what the browser sends (whole numbers in ASCII digits); the
    bounds, the known idle shares and the known pools are `pool_policy_set`'s to check."""

    resource_type = forms.CharField(widget=forms.HiddenInput)
    idle_share = forms.CharField(
        label="Idle share", widget=forms.Select(choices=PoolPolicy.IdleShare.choices),
        help_text="Who gets idle capacity first: jobs in pending order, or — fair share — among the highest "
        "priority, the quota borrowing least for its guarantee.",
    )
    min_runtime_s = AsciiIntegerField(
        label="Minimum runtime (seconds)", widget=forms.NumberInput(attrs=SECONDS_ATTRS),
        help_text="A job on idle resources is not reclaimed before it has run this long. 0: off; at most "
        "30 days.",
    )
    starvation_s = AsciiIntegerField(
        label="Starvation guard (seconds)", widget=forms.NumberInput(attrs=SECONDS_ATTRS),
        help_text="A job waiting longer than this, blocked only by capacity, gets nodes kept for it as they "
        "empty; running jobs are never stopped. 0: off; at most 30 days.",
    )
    starvation_hold = forms.BooleanField(
        label="Hold the quota for starving jobs", required=False,
        help_text="Extends the starvation guard (set a starvation time above 0 first): a starving job also keeps "
        "the guarantee its quota frees for it, so the quota's smaller jobs cannot take it GPU by GPU, and the "
        "first job of each quota blocked only by the quota's own use counts as starving.",
    )
    starved_min_runtime_s = AsciiIntegerField(
        label="Minimum runtime after starving (seconds)", widget=forms.NumberInput(attrs=SECONDS_ATTRS),
        help_text="Extends the starvation guard (set a starvation time above 0 first): a job that starts on idle "
        "resources after waiting longer than the starvation time is not reclaimed before it has run this long, "
        "so the next owner's job does not take back at once what the guard gathered. 0: off; at most 30 days.",
    )

    default_time_limit_s = AsciiIntegerField(
        label="Default time limit (seconds)", widget=forms.NumberInput(attrs=SECONDS_ATTRS), required=False,
        help_text="The time limit of jobs that set no maximum running time: they are stopped past it, and start "
        "estimates count on it. 0: none; at most 30 days.",
    )
    grow_interval_s = AsciiIntegerField(
        label="Grow interval (seconds)", required=False,
        widget=forms.NumberInput(attrs={**SECONDS_ATTRS, "max": v.MAX_GROW_INTERVAL_S}),
        help_text="An elastic job grows into idle GPUs at most this often after its start or last resize: every "
        f"resize restarts its workers from their checkpoint. Empty: {v.DEFAULT_GROW_INTERVAL_S} s; 0: every "
        "cycle; at most a day.",
    )

    def __init__(self, *args: Any, pool: str, **kwargs: Any) -> None:
        super().__init__(*args, auto_id=f"id_{pool}_%s", **kwargs)
        self.pool = pool

    @classmethod
    def of_row(cls, row: PoolPolicyRow) -> PoolPolicyForm:
        initial = {"resource_type": row.pool, "idle_share": row.idle_share, "min_runtime_s": row.min_runtime_s,
                   "starvation_s": row.starvation_s, "starvation_hold": row.starvation_hold,
                   "starved_min_runtime_s": row.starved_min_runtime_s,
                   "default_time_limit_s": row.default_time_limit_s, "grow_interval_s": row.grow_interval_s}
        return cls(pool=row.pool, initial=initial)
