from django.apps import AppConfig


class AgentSessionsConfig(AppConfig):
    name = "sessions"
    # "sessions" is django.contrib.sessions' label; this one is fixed before the first migration.
    label = "agent_sessions"
    verbose_name = "Conversations"

    def ready(self) -> None:
        from compression.guards import register_terminal_sandbox_probe
        from compression.settings_store import on_settings_changed
        from sessions.agent.tools import sandbox
        from sessions.events import broadcast_settings_changed

        on_settings_changed(broadcast_settings_changed)
        register_terminal_sandbox_probe(sandbox.problem)
        # A migration that rebuilds the message table on SQLite drops the search index's triggers.
        from django.db.models.signals import post_migrate

        from sessions.services.recall import index_ensure_after_migrate

        post_migrate.connect(index_ensure_after_migrate, sender=self)
