from django.apps import AppConfig


class AgentSessionsConfig(AppConfig):
    name = "sessions"
    # "sessions" is django.contrib.sessions' label; this one is fixed before the first migration.
    label = "agent_sessions"
    verbose_name = "Conversations"
