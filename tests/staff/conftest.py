from __future__ import annotations

import pytest


@pytest.fixture
def carol(django_user_model):
    """Staff, not a superuser, allowed to view conversations (what the dashboard lists)."""
    from django.contrib.auth.models import Permission

    user = django_user_model.objects.create_user("carol", password="carol-password-1", is_staff=True)
    user.user_permissions.add(Permission.objects.get(codename="view_conversation",
                                                     content_type__app_label="agent_sessions"))
    return user


@pytest.fixture
def staff_client(client, carol):
    client.force_login(carol)
    return client


@pytest.fixture
def scenario(alice, bob):
    """Three conversations, sessions in every state, calls and compressions, with the figures a
    person computes by hand from them."""
    import datetime as dt
    import time

    from django.utils import timezone

    from tests.staff import builders as b

    now = time.time()
    yesterday_noon = dt.datetime.combine(timezone.localdate() - dt.timedelta(days=1), dt.time(12),
                                         tzinfo=dt.UTC)
    a = b.conversation(alice, title="Alpha")
    sa = b.session(a, last_prompt_tokens=150_000, cooldown_until=now + 120)
    bc = b.conversation(bob, title="Bravo", context_length=100_000)
    b.session(bc, ended_at=timezone.now(), end_reason="compression", cooldown_until=now + 500, ineffective_count=3)
    sb = b.session(bc, last_prompt_tokens=50_000, ineffective_count=2)
    c = b.conversation(alice, title="Charlie")
    b.session(c, cooldown_until=now - 10, ineffective_count=1)

    b.call(a, prompt=1000, read=250, cost="0.010", nocache="0.025", session=sa)
    b.call(bc, prompt=3000, read=2750, cost="0.020", nocache="0.050", session=sb, created_at=yesterday_noon)
    b.call(a, prompt=5000, error="prompt is too long", session=sa)  # failed call: not in cache figures
    b.call(a, prompt=2000, cost="0.5", nocache="0.5", purpose="compression", session=sa)

    for status, trigger in [("compressed", "preflight"), ("compressed", "preflight"), ("compressed", "manual"),
                            ("failed", "preflight"), ("aborted", "post_response"), ("noop", "manual")]:
        b.event(a, sa, status=status, trigger=trigger)
    b.event(a, sa, status="skipped", trigger="manual", reason="already compressing")
    b.event(bc, sb, status="failed", trigger="hygiene", started_at=yesterday_noon)
    return {
        "hit_rate": 75.0,  # (250 + 2750) / (1000 + 3000), token-weighted (the mean of rates would be 58.3)
        "saved": "0.045",  # (0.025 + 0.050) − (0.010 + 0.020)
        "by_status": {"compressed": 3, "failed": 2, "aborted": 1, "skipped": 1, "noop": 1},
        "cooldown": 1, "antithrash": 1, "active": 3, "conversations": 3,
        "conversations_by_title": {"Alpha": a, "Bravo": bc, "Charlie": c},
        "yesterday": yesterday_noon.date(),
    }
