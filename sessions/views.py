"""Conversation pages. Thin: look up through selectors (owner-checked), call services, render."""
from __future__ import annotations

from django.http import Http404
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from sessions import selectors
from sessions.models import Conversation, Session


@require_GET
def home(request):
    conversations = selectors.conversation_list_for_user(user=request.user)
    return render(request, "sessions/home.html", {"conversations": conversations})


@require_POST
def conversation_create(request):
    conversation = Conversation.objects.create(owner=request.user)
    Session.objects.create(conversation=conversation)
    return redirect("conversation", conversation_id=conversation.id)


@require_GET
def conversation_detail(request, conversation_id):
    conversation = selectors.conversation_get_for_user(user=request.user, conversation_id=conversation_id)
    if conversation is None:
        raise Http404("No such conversation")
    return render(request, "sessions/conversation.html", {"conversation": conversation})
