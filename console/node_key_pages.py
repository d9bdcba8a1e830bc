"""The staff page of node keys (/nodes/keys/, from the Nodes page): add a node (its key, shown this
once), rotate a node's key (the new one shown once, the old refused at once), revoke it (DESIGN §6)."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views import View

from console.views import StaffRequiredMixin
from scheduler.selectors.node_keys import node_key_list
from scheduler.services.node_keys import node_key_create, node_key_revoke, node_key_rotate


class NodeKeyListView(StaffRequiredMixin, View):
    """GET: node keys (prefix only); POST: add a node, whose key is shown on this answer only."""

    template_name = "console/node_keys.html"

    def _render(self, request: HttpRequest, **extra: Any) -> HttpResponse:
        context = {"keys": node_key_list(), "errors": {}, **extra}
        return render(request, self.template_name, context, status=400 if extra.get("errors") else 200)

    def get(self, request: HttpRequest) -> HttpResponse:
        return self._render(request)

    def post(self, request: HttpRequest) -> HttpResponse:
        name = request.POST.get("node", "").strip()
        try:
            created = node_key_create(node_name=name, created_by=request.user)
        except ValidationError as error:
            return self._render(request, errors=error.message_dict, node=name)
        return self._render(request, new_key=created, action="added")


class NodeKeyActionView(StaffRequiredMixin, View):
    """POST rotate (the new key shown on the answer) or revoke."""

    def post(self, request: HttpRequest, node: str, action: str) -> HttpResponse:
        try:
            if action == "rotate":
                created = node_key_rotate(node_name=node, created_by=request.user)
                return NodeKeyListView()._render(request, new_key=created, action="rotated")
            if action != "revoke":
                messages.error(request, f"Unknown action {action!r}: rotate or revoke.")
                return redirect("console:node_keys")
            key = node_key_revoke(node_name=node)
        except ValidationError as error:
            messages.error(request, "; ".join(error.messages))
        else:
            messages.success(request, f"The key of {key.node_name} ({key.prefix}…) is revoked: its agent is refused "
                                      "from now on.")
        return redirect("console:node_keys")
