"""Console forms. They parse what the browser sends; the services decide what is allowed.

A service refuses with a ValidationError keyed by field ("name", "quota", "roles[1].gpus",
"min_gpus", …); `apply_service_errors` puts each message at the field the user typed it in.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterable, Mapping
from typing import Any

from django import forms
from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import ValidationError
from django.forms import BaseFormSet, formset_factory

from console.fields import AsciiDecimalField, AsciiIntegerField
from scheduler import validation as v
from scheduler.models import GRACE_SECONDS_MAX, IdleMode, Job, JobType, ResourceQuota, ResourceType, Workspace
from scheduler.paths import default_checkpoint_dir
from scheduler.selectors import QuotaChoice, gpu_models_by_pool, quota_choices, user_workspaces
from scheduler.services.jobs import check_roles_fit

ENV_LINE = re.compile(r"^\s*([^=\s]+)\s*=(.*)$")
ROLE_ERROR_KEY = re.compile(r"^roles\[(\d+)\]\.(\w+)$")

IDLE_MODE_HELP: dict[str, str] = {
    IdleMode.OFF: "Run only on the quota's guaranteed resources. Never preempted; waits when the quota is full.",
    IdleMode.ACCEPTABLE: (
        "Use the quota first; when it is full, start on idle resources (Not in Quota, may be preempted) "
        "and move In Quota once the quota has room."
    ),
    IdleMode.ONLY: "Run only on idle resources: always Not in Quota, and preempted whenever an owner reclaims them.",
}


class IdleModeSelect(forms.RadioSelect):
    """Radio buttons whose options carry their one-line explanation."""

    option_template_name = "console/widgets/idle_mode_option.html"

    def create_option(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        option = super().create_option(*args, **kwargs)
        option["help"] = IDLE_MODE_HELP.get(option["value"], "")
        return option


def parse_environment(text: str) -> dict[str, str]:
    """KEY=value per line; blank lines and # comments are skipped. Names are checked by the service."""
    env: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        match = ENV_LINE.match(line)
        if not match:
            raise ValidationError(f"Line {number} is not KEY=value: {line.strip()[:60]!r}.")
        env[match.group(1)] = match.group(2).strip()
    return env


def format_environment(env: Mapping[str, str]) -> str:
    # Sorted: PostgreSQL's jsonb does not keep the order keys were written in.
    return "\n".join(f"{key}={value}" for key, value in sorted(env.items()))


class JobSubmitForm(forms.Form):
    """The job fields of PAI-DLC's submission page; roles come in `RoleFormSet`."""

    token = forms.UUIDField(widget=forms.HiddenInput)
    name = forms.CharField(
        max_length=v.NAME_LENGTHS["job"],
        help_text="Lowercase letters, digits and dashes, e.g. bert-large-finetune.",
        widget=forms.TextInput(attrs={"autocomplete": "off", "spellcheck": "false"}),
    )
    workspace = forms.ModelChoiceField(queryset=Workspace.objects.none(), empty_label=None)
    job_type = forms.ChoiceField(label="Job type", choices=JobType.choices, initial=JobType.PYTORCH)
    image = forms.CharField(
        max_length=255,
        required=False,
        help_text="Container image, e.g. pytorch/pytorch:2.4.0-cuda12.4 (recorded with the job).",
    )
    command = forms.CharField(
        max_length=v.MAX_COMMAND_CHARS,
        widget=forms.Textarea(attrs={"rows": 3, "spellcheck": "false"}),
        help_text="Run with /bin/sh -c in each instance. RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT and "
        "CUDA_VISIBLE_DEVICES are set for you.",
    )
    environment = forms.CharField(
        label="Environment variables",
        required=False,
        widget=forms.Textarea(attrs={"rows": 3, "spellcheck": "false", "placeholder": "NCCL_DEBUG=INFO"}),
        help_text="One KEY=value per line.",
    )
    data_mount = forms.CharField(label="Data mount path", max_length=255, required=False)
    code_mount = forms.CharField(
        label="Code mount path", max_length=255, required=False, help_text="Working directory of the command."
    )
    quota = forms.TypedChoiceField(label="Resource Quota", coerce=int, choices=())
    priority = forms.TypedChoiceField(
        coerce=int,
        choices=[(n, str(n)) for n in range(1, 10)],
        initial=1,
        help_text="1–9; higher runs first, and reclaims idle resources from lower-priority jobs first.",
    )
    idle_mode = forms.ChoiceField(
        label="Idle Resources", choices=IdleMode.choices, initial=IdleMode.OFF, widget=IdleModeSelect
    )
    max_running_minutes = AsciiIntegerField(
        label="Maximum running time (minutes)",
        required=False,
        min_value=1,
        max_value=v.MAX_RUNNING_MINUTES,
        help_text="Empty: no limit. The job is stopped when it has run this long.",
    )
    fault_tolerance = forms.BooleanField(
        label="Automatic fault tolerance",
        required=False,
        help_text="Restart the job automatically after a preemption, a failed instance or a lost node.",
    )
    max_restarts = AsciiIntegerField(
        label="Max restarts", min_value=0, max_value=v.MAX_RESTARTS, initial=3,
        help_text="Restarts after failures (a failed instance, a lost node, a hang), each after a backoff. "
        "Preemptions use none: a preempted job resumes at once.",
    )
    grace_seconds = AsciiDecimalField(
        label="Grace period (seconds)", required=False, min_value=0, max_value=GRACE_SECONDS_MAX, max_digits=9,
        decimal_places=3,
        help_text=f"Between SIGTERM and SIGKILL when the job is preempted or stopped: time to save a checkpoint "
        f"(0–{GRACE_SECONDS_MAX:,}). Empty: the cluster default.",
    )
    checkpoint_dir = forms.CharField(
        label="Checkpoint directory",
        max_length=255,
        required=False,
        help_text="Empty: a directory of the job's own under the cluster's data directory.",
    )

    def __init__(self, *args: Any, user: AbstractBaseUser, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.user = user
        self.fields["workspace"].queryset = user_workspaces(user=user)
        self.quota_options: list[QuotaChoice] = quota_choices(user=user)
        self.fields["quota"].choices = [(c.quota.pk, c.quota.name) for c in self.quota_options]
        if not self.is_bound and not self.initial.get("token"):
            self.initial["token"] = uuid.uuid4()
        default = settings.TIDEPOOL_GRACE_SECONDS
        self.fields["grace_seconds"].widget.attrs["placeholder"] = f"{default:g} (cluster default)"

    def clean_name(self) -> str:
        # The service checks this too; checking here as well shows it together with the other errors.
        name = self.cleaned_data["name"].strip()
        problem = v.name_problem(name, "job")
        if problem:
            raise ValidationError(problem)
        return name

    def clean_environment(self) -> dict[str, str]:
        env = parse_environment(self.cleaned_data.get("environment") or "")
        try:
            return v.check_environment(env)
        except ValidationError as error:
            raise ValidationError(error.message_dict["environment"]) from None

    def quota_object(self) -> ResourceQuota | None:
        quota_id = self.cleaned_data.get("quota")
        return next((c.quota for c in self.quota_options if c.quota.pk == quota_id), None)

    def selected_quota_id(self) -> int | None:
        try:
            return int(self["quota"].value())
        except (TypeError, ValueError):
            return None

    def service_kwargs(self, roles: list[dict[str, Any]]) -> dict[str, Any]:
        data = self.cleaned_data
        return {
            "user": self.user,
            "workspace": data["workspace"],
            "quota": self.quota_object(),
            "name": data["name"],
            "command": data["command"],
            "roles": roles,
            "job_type": data["job_type"],
            "image": data["image"],
            "environment": data["environment"],
            "data_mount": data["data_mount"],
            "code_mount": data["code_mount"],
            "priority": data["priority"],
            "idle_mode": data["idle_mode"],
            "max_running_minutes": data["max_running_minutes"],
            "fault_tolerance": data["fault_tolerance"],
            "max_restarts": data["max_restarts"],
            "checkpoint_dir": data["checkpoint_dir"],
            "grace_seconds": data["grace_seconds"],
        }

    @staticmethod
    def initial_from_job(job: Job) -> dict[str, Any]:
        """The form filled from an existing job ("Clone"): same settings, a new name."""
        suffix = "-clone"
        return {
            "name": job.name[: 100 - len(suffix)] + suffix,
            "workspace": job.workspace_id,
            "job_type": job.job_type,
            "image": job.image,
            "command": job.command,
            "environment": format_environment(job.environment or {}),
            "data_mount": job.data_mount,
            "code_mount": job.code_mount,
            "quota": job.quota_id,
            "priority": job.priority,
            "idle_mode": job.idle_mode,
            "max_running_minutes": job.max_running_minutes,
            "fault_tolerance": job.fault_tolerance,
            "max_restarts": job.max_restarts,
            "grace_seconds": job.grace_seconds,
            # A clone writes its own checkpoints unless the original chose a directory on purpose.
            "checkpoint_dir": "" if job.checkpoint_dir == str(default_checkpoint_dir(job)) else job.checkpoint_dir,
        }


class RoleForm(forms.Form):
    """One role (e.g. master, worker): instance count and per-instance resources."""

    name = forms.CharField(max_length=v.NAME_LENGTHS["role"], initial="worker")
    pod_count = AsciiIntegerField(label="Instances", min_value=1, max_value=v.MAX_PODS_PER_JOB, initial=1)
    min_pod_count = AsciiIntegerField(
        label="Elastic: at least", required=False, min_value=1, max_value=v.MAX_PODS_PER_JOB,
        help_text="Instances: min … max. Empty: exactly Instances. The job starts with the minimum and grows onto "
        "idle GPUs; an owner takes back the instances beyond it (the job keeps running). Needs idle resources.")
    gpu_type = forms.ChoiceField(label="GPU model", required=False)
    gpus = AsciiIntegerField(label="GPUs", min_value=0, max_value=v.MAX_GPUS_PER_POD, initial=1,
                             help_text="Per instance: at least 1, or 0 CPU-only.")
    cpu_only = forms.BooleanField(label="CPU-only", required=False, help_text="This role runs without GPUs.")
    cpu = AsciiDecimalField(label="CPU cores", min_value=0, max_value=v.MAX_CPU_PER_POD, max_digits=10,
                             decimal_places=3, initial=4)
    memory_gib = AsciiDecimalField(label="Memory (GiB)", min_value=0, max_value=v.MAX_MEMORY_GIB_PER_POD,
                                    max_digits=12, decimal_places=3, initial=32)
    shared_memory_gib = AsciiDecimalField(
        label="Shared mem (GiB)", min_value=0, max_value=v.MAX_MEMORY_GIB_PER_POD, max_digits=12,
        decimal_places=3, initial=8,
    )

    def __init__(self, *args: Any, gpu_models: Iterable[tuple[str, str]] = (), **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["gpu_type"].choices = [("", "Any model"), *gpu_models]

    def clean_name(self) -> str:
        name = self.cleaned_data["name"].strip()
        problem = v.name_problem(name, "role")
        if problem:
            raise ValidationError(problem)
        return name

    def as_service_role(self) -> dict[str, Any]:
        data = self.cleaned_data
        return {key: data.get(key) for key in ("name", "pod_count", "min_pod_count", "gpu_type", "gpus", "cpu_only",
                                               "cpu", "memory_gib", "shared_memory_gib")}


class BaseRoleFormSet(BaseFormSet):
    def clean(self) -> None:
        if any(self.errors):
            return
        names = [form.cleaned_data.get("name") for form in self.forms if form.cleaned_data]
        duplicates = sorted({name for name in names if names.count(name) > 1})
        if duplicates:
            raise ValidationError(f"Each role needs its own name: {', '.join(duplicates)} appears twice.")

    def service_roles(self) -> list[dict[str, Any]]:
        return [form.as_service_role() for form in self.forms if form.cleaned_data]


RoleFormSet = formset_factory(
    RoleForm, formset=BaseRoleFormSet, extra=0, min_num=1, validate_min=True, max_num=v.MAX_ROLES,
    validate_max=True, absolute_max=v.MAX_ROLES,
)


def gpu_model_choices() -> list[tuple[str, str]]:
    """Every GPU model of the cluster, labelled with its pool: the form narrows them to the quota's pool."""
    choices = []
    for pool, models in sorted(gpu_models_by_pool().items()):
        label = ResourceType(pool).label if pool in ResourceType.values else pool
        choices += [(model, f"{model} ({label})") for model in models]
    return choices


def role_formset(
    data: Mapping[str, Any] | None = None, *, initial: list[dict[str, Any]] | None = None
) -> BaseRoleFormSet:
    return RoleFormSet(
        data, prefix="roles", initial=initial, form_kwargs={"gpu_models": gpu_model_choices()}
    )


def role_errors_beside_form_errors(form: JobSubmitForm, formset: BaseRoleFormSet) -> list[str]:
    """When some fields are wrong the job is not submitted, but the roles that parsed are still checked
    against the chosen quota's pool and the quota (the service's `check_roles_fit`), so a pod larger
    than any node shows at its role's field together with the other errors. Returns the messages for
    the roles as a whole, as `apply_service_errors` does."""
    quota = form.quota_object() if "quota" in getattr(form, "cleaned_data", {}) else None
    if quota is None:
        return []
    indices = [i for i, role in enumerate(formset.forms) if role.is_valid()]
    if not indices:
        return []
    idle_mode = form.cleaned_data.get("idle_mode") or IdleMode.OFF
    try:
        check_roles_fit(quota=quota, roles=[formset.forms[i].as_service_role() for i in indices], idle_mode=idle_mode)
    except ValidationError as error:
        if not hasattr(error, "error_dict"):
            return []
        # The roles were checked without the invalid ones: number their errors as the formset does.
        renumbered: dict[str, list[str]] = {}
        for key, messages in error.message_dict.items():
            match = ROLE_ERROR_KEY.match(key)
            if match:
                key = f"roles[{indices[int(match.group(1))]}].{match.group(2)}"
            # Kept as they are: if some of the roles cannot fit, all of them cannot either.
            renumbered[key] = messages
        return apply_service_errors(ValidationError(renumbered), form, formset)
    return []


def apply_service_errors(
    error: ValidationError, form: forms.Form, formset: BaseRoleFormSet | None = None
) -> list[str]:
    """Attach a service's refusal to the fields it names. Returns messages that belong to the roles
    as a whole ("roles") so the page can show them above the roles."""
    role_errors: list[str] = []
    if not hasattr(error, "error_dict"):
        form.add_error(None, error)
        return role_errors
    for key, messages in error.message_dict.items():
        role_match = ROLE_ERROR_KEY.match(key)
        if formset is not None and role_match:
            index, field = int(role_match.group(1)), role_match.group(2)
            if index < len(formset.forms) and field in formset.forms[index].fields:
                for message in messages:
                    formset.forms[index].add_error(field, message)
                continue
        if formset is not None and key == "roles":
            role_errors.extend(messages)
            continue
        target = key if key in form.fields else None
        for message in messages:
            form.add_error(target, message)
    return role_errors
