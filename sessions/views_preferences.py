"""The look of the app a user chose, kept with the account: the colour theme (auto, light, dark).

One POST, answered two ways: theme.js sends it with `Accept: application/json` and gets JSON
back (the page switched already, without a reload); a plain form post, without JavaScript, is
redirected back to the page it came from, which then renders with the new theme.
"""
from __future__ import annotations

from django.http import HttpResponseBadRequest, JsonResponse
from django.shortcuts import redirect
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST

from sessions.services.preferences import user_theme_set


def _back(request) -> str:
    """Where the form was: its `next` field when it is a path of this site, else the home page."""
    target = request.POST.get("next", "")
    if target and url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()},
                                                  require_https=request.is_secure()):
        return target
    return "home"


@require_POST
def theme_set(request):
    theme = request.POST.get("theme", "")
    try:
        user_theme_set(user=request.user, theme=theme)
    except ValueError as exc:
        return HttpResponseBadRequest(str(exc), content_type="text/plain")
    if "application/json" in request.headers.get("Accept", ""):
        return JsonResponse({"theme": theme})
    return redirect(_back(request))
