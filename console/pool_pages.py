"""The pools page (staff): each pool's §2b policies — idle share, minimum runtime, starvation guard
and its hold —, its default time limit (§2d) and grow interval (§2c), shown and edited in place. Reads through `scheduler.selectors.pools`, writes through
`scheduler.services.pool_policies.pool_policy_set`, which checks the input, records who changed
what and wakes the scheduler; the next cycle uses the new policies."""

from __future__ import annotations

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views import View

from console.cluster_forms import PoolPolicyForm
from console.forms import apply_service_errors
from console.views import StaffRequiredMixin
from scheduler import validation as v
from scheduler.selectors.pools import pool_policy_rows
from scheduler.services.pool_policies import pool_policy_set


class PoolPolicyView(StaffRequiredMixin, View):
    """GET: every pool with its policies and a form; POST: one pool's form (the page again, with the
    errors at the fields and status 400, when anything is refused)."""

    template_name = "console/pool_list.html"

    def get(self, request: HttpRequest) -> HttpResponse:
        return self._render(request)

    def post(self, request: HttpRequest) -> HttpResponse:
        pool = str(request.POST.get("resource_type", ""))[:16]
        form = PoolPolicyForm(request.POST, pool=pool if pool.isidentifier() else "unknown")
        if form.is_valid():
            data = form.cleaned_data
            # An empty grow interval is its default, not 0 (which means: grow every cycle).
            grow_interval_s = data.get("grow_interval_s")
            grow_interval_s = v.DEFAULT_GROW_INTERVAL_S if grow_interval_s is None else grow_interval_s
            try:
                saved = pool_policy_set(user=request.user, resource_type=data["resource_type"],
                                        idle_share=data["idle_share"], min_runtime_s=data["min_runtime_s"],
                                        starvation_s=data["starvation_s"],
                                        starvation_hold=data["starvation_hold"],
                                        starved_min_runtime_s=data["starved_min_runtime_s"],
                                        default_time_limit_s=data.get("default_time_limit_s") or 0,
                                        grow_interval_s=grow_interval_s)
            except ValidationError as error:
                apply_service_errors(error, form)
            else:
                label = saved.policy.get_resource_type_display()
                if saved.changes:
                    messages.success(request, f"{label} pool: {'; '.join(saved.changes)}. The scheduler's next "
                                              "cycle uses it.")
                else:
                    messages.info(request, f"{label} pool: nothing changed.")
                return redirect(reverse("console:pools") + f"#pool-{saved.policy.resource_type}")
        return self._render(request, bound=form, status=400)

    def _render(self, request: HttpRequest, *, bound: PoolPolicyForm | None = None, status: int = 200) -> HttpResponse:
        rows = pool_policy_rows()
        pools = []
        for row in rows:
            form = bound if bound is not None and bound.pool == row.pool else PoolPolicyForm.of_row(row)
            pools.append((row, form))
        # A form for a pool the page does not show (an unknown one): its errors go above the pools.
        stray = bound if bound is not None and all(row.pool != bound.pool for row in rows) else None
        context = {"pools": pools, "stray": stray, "max_days": v.MAX_POLICY_SECONDS // 86400}
        return render(request, self.template_name, context, status=status)
