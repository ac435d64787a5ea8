"""The live fan-out benchmark's publisher runs inside the test process (its smoke test): its own
Celery app must not become the current app, through which the product's shared tasks are sent, or
every later enqueue in that process goes to the benchmark's Redis after it has stopped."""
from __future__ import annotations

from celery import current_app

from bench.fanout.publisher import Publisher
from hermes_web.celery import app
from sessions.tasks import agent_turn_run


def test_the_publisher_leaves_the_products_celery_app_current():
    publisher = Publisher("redis://127.0.0.1:1/0")  # never connected to here
    try:
        assert current_app._get_current_object() is app
        assert agent_turn_run.app is app
        assert agent_turn_run.app.conf.broker_url != "redis://127.0.0.1:1/0"
    finally:
        publisher.close()
