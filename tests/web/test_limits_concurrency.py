"""Limits under concurrency, on the tier's database (the SQLite file by default, PostgreSQL when
DATABASE_URL points at it): 20 sends of one user at the same instant, each from its own thread
and database connection, against a limit of 7: exactly 7 are accepted and handed to the queue,
the 13 others are refused with the limit's reason, and none fails with a database error."""
from __future__ import annotations

import threading

import pytest
from django.db import connection

from sessions.models import Conversation, LimitDefaults, Turn, UsageDay, UserLimits
from sessions.services import turns as turns_service
from sessions.services.context import session_start
from sessions.services.turns import TurnRejected, turn_submit

SENDS = 20
ALLOWED = 7


@pytest.fixture
def handed_over(monkeypatch):
    """The turns handed to the task queue (the broker itself is not part of this test)."""
    seen: list[int] = []
    lock = threading.Lock()

    def enqueue(turn_id: int) -> str:
        with lock:
            seen.append(turn_id)
        return ""

    monkeypatch.setattr(turns_service, "turn_enqueue", enqueue)
    return seen


def burst(user, conversations) -> tuple[list[int], list[str], list[BaseException]]:
    """SENDS threads submit at once (released by a barrier): accepted turn ids, refusals, errors."""
    barrier = threading.Barrier(SENDS)
    accepted: list[int] = []
    refusals: list[str] = []
    errors: list[BaseException] = []

    def submit(i: int) -> None:
        try:
            barrier.wait(timeout=30)
            accepted.append(turn_submit(user=user, conversation_id=conversations[i % len(conversations)].id,
                                        text=f"message {i}").turn.id)
        except TurnRejected as exc:
            refusals.append(str(exc))
        except BaseException as exc:  # reported by the test, not lost in the thread
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=submit, args=(i,)) for i in range(SENDS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    return accepted, refusals, errors


@pytest.mark.parametrize(("limit", "words"), [("messages_per_minute", "in the last minute, your limit of 7 a minute"),
                                              ("messages_per_day", "today, your daily limit of 7")])
def test_twenty_concurrent_sends_at_a_limit_of_seven_queue_exactly_seven(transactional_db, alice, handed_over,
                                                                         limit, words):
    row = LimitDefaults.load()
    setattr(row, limit, ALLOWED)
    row.save()
    # Three conversations: the sends do not queue behind one conversation's lock, only the user's.
    conversations = [Conversation.objects.create(owner=alice) for _ in range(3)]
    for c in conversations:
        session_start(conversation=c)
    accepted, refusals, errors = burst(alice, conversations)
    assert errors == []
    assert len(accepted) == ALLOWED and len(refusals) == SENDS - ALLOWED
    assert all(f"You have sent 7 messages {words}" in text for text in refusals), refusals
    assert sorted(handed_over) == sorted(accepted)
    assert sorted(Turn.objects.filter(status="queued").values_list("id", flat=True)) == sorted(accepted)
    assert UsageDay.objects.get(user=alice).messages == ALLOWED


def test_concurrent_sends_of_two_users_count_each_against_their_own_limit(transactional_db, alice, bob, handed_over):
    row = LimitDefaults.load()
    row.messages_per_day = 3
    row.save()
    UserLimits.objects.create(user=bob, messages_per_day=5)
    alices, bobs = Conversation.objects.create(owner=alice), Conversation.objects.create(owner=bob)
    for c in (alices, bobs):
        session_start(conversation=c)
    results: dict[str, tuple] = {}

    def run(name, who, where):
        results[name] = burst(who, [where])

    threads = [threading.Thread(target=run, args=("alice", alice, alices)),
               threading.Thread(target=run, args=("bob", bob, bobs))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=240)
    assert results["alice"][2] == [] and results["bob"][2] == []
    assert len(results["alice"][0]) == 3 and len(results["bob"][0]) == 5
    assert Turn.objects.filter(conversation=alices).count() == 3 and Turn.objects.filter(conversation=bobs).count() == 5
