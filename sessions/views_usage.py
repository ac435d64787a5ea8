"""The user's own page of use against their limits (today and this month). It shows the signed-in
user's figures only; there is no way to ask for another user's (staff see everyone's on the staff
dashboard)."""
from __future__ import annotations

from django.shortcuts import render
from django.urls import path
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from sessions.services.limits_usage import usage_report


@never_cache
@require_GET
def usage(request):
    # LoginRequiredMiddleware sends anonymous visitors to the login page.
    return render(request, "sessions/usage.html", usage_report(request.user))


urlpatterns = [
    path("usage/", usage, name="usage"),
]
