"""Login throttling with django-axes: the policy it reads and the page it answers a lockout with.

The failure limit and the cool-off are read from HERMES_LOGIN_FAILURES and
HERMES_LOGIN_COOLOFF_MINUTES on every attempt (settings.py points AXES_FAILURE_LIMIT and
AXES_COOLOFF_TIME here), so one setting governs both the site's login and the admin's. A locked-out
attempt gets the ordinary login page with a message that says for whom, from where and until when,
and status 429.
"""
from __future__ import annotations

import math
from datetime import datetime, timedelta

from axes.helpers import get_client_ip_address, get_client_username
from axes.models import AccessAttempt
from django.conf import settings
from django.contrib.auth.forms import AuthenticationForm
from django.db.models import Max
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone


def failure_limit(request: HttpRequest | None = None, credentials: dict | None = None) -> int:
    """Failed logins for one username from one address before the pair is refused."""
    return settings.HERMES_LOGIN_FAILURES


def cool_off(request: HttpRequest | None = None) -> timedelta:
    """How long a locked-out username and address pair is refused, counted from its last failure."""
    return timedelta(minutes=settings.HERMES_LOGIN_COOLOFF_MINUTES)


def retry_at(username: str, ip_address: str | None) -> datetime | None:
    """When the lock on this username and address ends: the last recorded failure plus the
    cool-off. Failures refused during a lockout are not recorded (settings.py), so the time does
    not move while someone keeps trying."""
    last = AccessAttempt.objects.filter(username=username, ip_address=ip_address).aggregate(
        last=Max("attempt_time"))["last"]
    return last + cool_off() if last else None


def lockout_response(request: HttpRequest, original_response: HttpResponse | None = None,
                     credentials: dict | None = None) -> HttpResponse:
    """The login page with the lockout message, status 429 (AXES_LOCKOUT_CALLABLE).

    axes calls this from its middleware after the login view ran, for the site's login and the
    admin's. Its asynchronous path passes the credentials in the second place, so they are taken
    from the request, where axes keeps them, and only then from the arguments.
    """
    if not isinstance(credentials, dict):
        credentials = original_response if isinstance(original_response, dict) else None
    credentials = getattr(request, "axes_credentials", None) or credentials
    username = get_client_username(request, credentials) or ""
    ip_address = getattr(request, "axes_ip_address", None) or get_client_ip_address(request)
    now = getattr(request, "axes_attempt_time", None) or timezone.now()
    # No record left: the lock ended at this very moment (axes removed the expired attempt while
    # refusing this one at the boundary), so the next attempt is allowed.
    until = retry_at(username, ip_address) or now
    minutes = max(1, math.ceil((until - now).total_seconds() / 60))
    form = AuthenticationForm(request, initial={"username": username})
    context = {
        "form": form,
        "next": request.POST.get("next", "") if request.method == "POST" else "",
        "lockout": {"username": username, "retry_at": until, "minutes": minutes},
    }
    return render(request, "registration/login.html", context, status=429)
