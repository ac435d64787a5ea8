"""Services enqueue tasks by name (sessions/services/enqueue.py), never by importing the task
module: each name is a task every process registers, and goes to the queue whose workers run it."""
from __future__ import annotations

from hermes_web.celery import app
from sessions.services import enqueue


def _queue(signature) -> str:
    return app.amqp.router.route({}, signature.task, signature.args, {})["queue"].name


def test_each_signature_names_a_registered_task_on_its_queue():
    turn = enqueue.turn_run_signature(7)
    compression = enqueue.compression_run_signature(8, "holder", True)
    title = enqueue.title_make_signature("c0ffee")
    assert [s.task in app.tasks for s in (turn, compression, title)] == [True, True, True]
    assert [_queue(s) for s in (turn, compression, title)] == ["agent", "compression", "compression"]
    assert (turn.args, compression.args, title.args) == ((7,), (8, "holder", True), ("c0ffee",))


def test_a_chained_job_ignores_the_result_before_it():
    job = enqueue.compression_run_signature(8, "holder") | enqueue.turn_run_signature(7)
    assert [task.immutable for task in job.tasks] == [True, True]
