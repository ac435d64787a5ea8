"""The staff dashboard (staff only) and the Prometheus endpoint (staff or a bearer token)."""
from __future__ import annotations

import hmac

from django.conf import settings
from django.contrib.auth.decorators import login_not_required
from django.http import Http404, HttpResponse, HttpResponseForbidden
from django.shortcuts import render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_safe

from compression import settings_store
from sessions.services.share import STAFF_LIST_LIMIT, share_links_active
from staff import metrics as prometheus
from staff import selectors

DASHBOARD_PERMISSION = "agent_sessions.view_conversation"


@never_cache
@require_GET
def dashboard(request):
    # LoginRequiredMiddleware already sent anonymous visitors to the login page.
    if not request.user.is_staff:
        raise Http404("No such page")
    # It lists every conversation by title and owner: staff need the permission to view them
    # (superusers have it), as in the admin.
    if not request.user.has_perm(DASHBOARD_PERMISSION):
        return HttpResponseForbidden("Forbidden: the staff dashboard needs the permission \"Conversations | "
                                     "Conversation | Can view conversation\" (granted on the user's page in the "
                                     "admin).\n", content_type="text/plain; charset=utf-8")
    cfg = settings_store.current()
    return render(request, "staff/dashboard.html", {**selectors.dashboard(cfg=cfg), "cfg": cfg,
                                                    "share_links": share_links_active(), "share_links_limit": STAFF_LIST_LIMIT})


def metrics_token_ok(request) -> bool:
    """The request carries `Authorization: Bearer $HERMES_METRICS_TOKEN` (never, when it is unset)."""
    expected = getattr(settings, "HERMES_METRICS_TOKEN", "") or ""
    if not expected:
        return False
    scheme, _, given = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not given.strip():
        return False
    return hmac.compare_digest(given.strip().encode(), expected.encode())


@login_not_required  # Prometheus has no session: the checks are done here
@never_cache
@require_safe
def metrics(request):
    user = request.user
    if not ((user.is_authenticated and user.is_staff) or metrics_token_ok(request)):
        return HttpResponseForbidden("Forbidden: staff session or metrics bearer token required.\n",
                                     content_type="text/plain; charset=utf-8")
    return HttpResponse(prometheus.render(selectors.metrics_snapshot()), content_type=prometheus.CONTENT_TYPE)
