from django.apps import AppConfig
from django.db.models.signals import post_migrate


class AgentSessionsConfig(AppConfig):
    name = "sessions"
    # "sessions" is django.contrib.sessions' label; this one is fixed before the first migration.
    label = "agent_sessions"
    verbose_name = "Conversations"

    def ready(self) -> None:
        # Imported here, not at the top: Django imports this module while it loads the apps, before
        # any model can be imported, and these modules import the models.
        from compression.guards import register_terminal_sandbox_probe
        from compression.settings_store import on_settings_changed

        # The tasks are registered in every process, not only in the worker: services enqueue them
        # by name (sessions/services/enqueue.py), and a registered task is sent with its own options,
        # and run in the calling thread when CELERY_TASK_ALWAYS_EAGER is set.
        from sessions import tasks  # noqa: F401
        from sessions.agent.tools import sandbox
        from sessions.events import broadcast_settings_changed
        from sessions.services.recall import index_ensure_after_migrate

        on_settings_changed(broadcast_settings_changed)
        register_terminal_sandbox_probe(sandbox.problem)
        # A migration that rebuilds the message table on SQLite drops the search index's triggers.
        post_migrate.connect(index_ensure_after_migrate, sender=self)
