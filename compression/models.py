"""Runtime settings (SPEC §9), model prices (SPEC §3.3) and the audit trail of every change.

Each settings group is a singleton row (pk 1) whose fields are named exactly like the fields of the
matching frozen dataclass in ``compression.core.config``. The rows hold no validation of their own:
``compression.settings_store`` is the one writer, and it validates through the core validator.
Read the settings with ``settings_store.current()``, never from these models directly.
Secrets (the auxiliary and the custom endpoint's API keys) are encrypted at rest by ``EncryptedTextField``.
"""
from __future__ import annotations

import base64
import logging
from typing import Any, ClassVar

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from django.conf import settings
from django.core.validators import MinValueValidator
from django.db import models
from django.utils import timezone

from compression.core.caching import DEFAULT_STRATEGY
from compression.core.config import SPECS, group_fields

log = logging.getLogger(__name__)


def _help(group: str, name: str) -> str:
    spec = SPECS[group][name]
    valid = spec.valid or "one of the listed names"
    return f"{spec.help} Valid: {valid}."


def _fernet() -> MultiFernet:
    """Fernet keyed from SECRET_KEY (new tokens), also opening tokens of SECRET_KEY_FALLBACKS."""
    def key(secret: str) -> Fernet:
        hkdf = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=b"hermes-web settings secret")
        return Fernet(base64.urlsafe_b64encode(hkdf.derive(secret.encode())))
    return MultiFernet([key(s) for s in (settings.SECRET_KEY, *getattr(settings, "SECRET_KEY_FALLBACKS", ()))])


class EncryptedTextField(models.TextField):
    """Text that code reads and writes in clear and the database holds only encrypted.

    The column holds ``fernet:<token>``, or "" for no value. A value without the prefix is a
    plaintext written before encryption and reads as it is (migration 0004 encrypts those). A token
    that neither SECRET_KEY nor SECRET_KEY_FALLBACKS opens reads as "" and is logged, so a rotated
    key costs re-typing the secret, never a failed turn.
    """

    PREFIX = "fernet:"

    def from_db_value(self, value, expression, connection):
        if not value or not value.startswith(self.PREFIX):
            return value
        try:
            return _fernet().decrypt(value[len(self.PREFIX):].encode()).decode()
        except InvalidToken:
            log.error("%s cannot be decrypted with SECRET_KEY or SECRET_KEY_FALLBACKS; read as empty", self)
            return ""

    def get_prep_value(self, value):
        value = super().get_prep_value(value)
        if not value:
            return value
        return self.PREFIX + _fernet().encrypt(value.encode()).decode()


class SingletonSettings(models.Model):
    """One row per group, always pk 1."""

    SINGLETON_PK = 1
    group: ClassVar[str]

    class Meta:
        abstract = True

    def save(self, *args, **kwargs):
        self.pk = self.SINGLETON_PK
        super().save(*args, **kwargs)

    @classmethod
    def load(cls):
        obj, _ = cls.objects.get_or_create(pk=cls.SINGLETON_PK)
        return obj

    def values(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in group_fields(self.group)}

    def __str__(self) -> str:
        return str(self._meta.verbose_name)


class CompressionSettings(SingletonSettings):
    group = "compression"

    enabled = models.BooleanField(default=True, help_text=_help("compression", "enabled"))
    threshold = models.FloatField(default=0.50, help_text=_help("compression", "threshold"))
    target_ratio = models.FloatField(default=0.20, help_text=_help("compression", "target_ratio"))
    protect_last_n = models.IntegerField(default=20, help_text=_help("compression", "protect_last_n"))
    protect_first_n = models.IntegerField(default=3, help_text=_help("compression", "protect_first_n"))
    hygiene_hard_message_limit = models.IntegerField(
        default=5000, help_text=_help("compression", "hygiene_hard_message_limit"))
    max_compression_attempts = models.IntegerField(
        default=3, help_text=_help("compression", "max_compression_attempts"))
    in_place = models.BooleanField(default=False, help_text=_help("compression", "in_place"))
    on_summary_failure = models.CharField(max_length=20, default="abort",
                                          help_text=_help("compression", "on_summary_failure"))
    codex_gpt55_autoraise = models.BooleanField(default=True, help_text=_help("compression", "codex_gpt55_autoraise"))
    codex_gpt55_autoraise_notice = models.BooleanField(
        default=True, help_text=_help("compression", "codex_gpt55_autoraise_notice"))
    codex_app_server_auto = models.CharField(max_length=20, default="native",
                                             help_text=_help("compression", "codex_app_server_auto"))
    idle_compaction = models.BooleanField(default=False, help_text=_help("compression", "idle_compaction"))
    idle_compaction_share = models.FloatField(default=0.70, help_text=_help("compression", "idle_compaction_share"))
    idle_compaction_when = models.CharField(max_length=20, default="due_this_turn",
                                            help_text=_help("compression", "idle_compaction_when"))
    defer_horizon_turns = models.IntegerField(default=3, help_text=_help("compression", "defer_horizon_turns"))

    class Meta:
        verbose_name = verbose_name_plural = "compression"


class AuxiliarySettings(SingletonSettings):
    group = "auxiliary"

    provider = models.CharField(max_length=40, default="auto", help_text=_help("auxiliary", "provider"))
    model = models.CharField(max_length=200, blank=True, default="", help_text=_help("auxiliary", "model"))
    base_url = models.CharField("base URL", max_length=500, blank=True, default="",
                                help_text=_help("auxiliary", "base_url"))
    timeout = models.IntegerField(default=120, help_text=_help("auxiliary", "timeout"))
    # Write-only through the admin; never rendered, never exported, masked in the audit trail,
    # encrypted in the database.
    api_key = EncryptedTextField("API key", blank=True, default="")

    class Meta:
        verbose_name = verbose_name_plural = "auxiliary model (summariser)"


class PromptCachingSettings(SingletonSettings):
    group = "caching"

    cache_ttl = models.CharField("cache TTL", max_length=4, default="5m", help_text=_help("caching", "cache_ttl"))
    strategy = models.CharField(max_length=60, default=DEFAULT_STRATEGY, help_text=_help("caching", "strategy"))

    class Meta:
        verbose_name = verbose_name_plural = "prompt caching"


class ContextEngineSettings(SingletonSettings):
    group = "context"

    engine = models.CharField(max_length=64, default="compressor", help_text=_help("context", "engine"))
    recall_tools = models.BooleanField(default=True, help_text=_help("context", "recall_tools"))

    class Meta:
        verbose_name = verbose_name_plural = "context engine"


class ModelDefaults(SingletonSettings):
    group = "model"

    provider = models.CharField(max_length=40, default="simulator", help_text=_help("model", "provider"))
    model = models.CharField(max_length=200, default="sim-claude-200k", help_text=_help("model", "model"))
    context_length = models.IntegerField(null=True, blank=True, help_text=_help("model", "context_length"))
    max_tokens = models.IntegerField(default=4096, help_text=_help("model", "max_tokens"))
    base_url = models.CharField("base URL", max_length=500, blank=True, default="", help_text=_help("model", "base_url"))
    api_key = EncryptedTextField("API key", blank=True, default="")

    class Meta:
        verbose_name = verbose_name_plural = "model defaults"


class AgentSettings(SingletonSettings):
    group = "agent"

    max_iterations = models.IntegerField(default=30, help_text=_help("agent", "max_iterations"))
    terminal_enabled = models.BooleanField(default=False, help_text=_help("agent", "terminal_enabled"))
    terminal_timeout = models.IntegerField(default=30, help_text=_help("agent", "terminal_timeout"))
    terminal_network = models.BooleanField(default=False, help_text=_help("agent", "terminal_network"))

    class Meta:
        verbose_name = verbose_name_plural = "agent"


SETTINGS_MODELS: dict[str, type[SingletonSettings]] = {
    m.group: m
    for m in (CompressionSettings, AuxiliarySettings, PromptCachingSettings, ContextEngineSettings,
              ModelDefaults, AgentSettings)
}


class ModelPrice(models.Model):
    """USD per million tokens, used to price every API call and the savings from caching."""

    PRICE_FIELDS = ("input", "output", "cache_write_5m", "cache_write_1h", "cache_read")

    model = models.CharField(max_length=200, unique=True)
    input = models.DecimalField(max_digits=10, decimal_places=4, validators=[MinValueValidator(0)],
                                help_text="USD per million input tokens.")
    output = models.DecimalField(max_digits=10, decimal_places=4, validators=[MinValueValidator(0)],
                                 help_text="USD per million output tokens.")
    cache_write_5m = models.DecimalField(max_digits=10, decimal_places=4, validators=[MinValueValidator(0)],
                                         help_text="USD per million tokens written with a 5m TTL "
                                                   "(usually 1.25× input).")
    cache_write_1h = models.DecimalField(max_digits=10, decimal_places=4, validators=[MinValueValidator(0)],
                                         help_text="USD per million tokens written with a 1h TTL (usually 2× input).")
    cache_read = models.DecimalField(max_digits=10, decimal_places=4, validators=[MinValueValidator(0)],
                                     help_text="USD per million tokens read from the cache (usually 0.1× input).")

    class Meta:
        ordering = ["model"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(input__gte=0, output__gte=0, cache_write_5m__gte=0, cache_write_1h__gte=0,
                                   cache_read__gte=0),
                name="model_price_not_negative",
            )
        ]

    def __str__(self) -> str:
        return self.model

    def as_dict(self) -> dict[str, float]:
        return {name: float(getattr(self, name)) for name in self.PRICE_FIELDS}


class SettingsChange(models.Model):
    """One changed field: who, when, where from, old → new. Secrets are stored as "•••"."""

    SOURCES = [(s, s) for s in ("admin", "import", "command", "code")]
    MASK = "•••"

    at = models.DateTimeField(default=timezone.now, db_index=True)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                             related_name="+")
    username = models.CharField(max_length=150, blank=True, help_text="Kept if the user is deleted.")
    source = models.CharField(max_length=10, choices=SOURCES, default="admin")
    group = models.CharField(max_length=60)  # "mcp_servers." and a server name fit
    field = models.CharField(max_length=100)
    old_value = models.TextField(blank=True)
    new_value = models.TextField(blank=True)

    class Meta:
        ordering = ["-at", "-id"]
        verbose_name = "settings change"

    def __str__(self) -> str:
        return f"{self.group}.{self.field}: {self.old_value} → {self.new_value}"


MCP_TRANSPORTS = [("stdio", "stdio (a command the worker starts)"), ("http", "streamable HTTP (a URL)")]
MCP_STATES = [(s, s) for s in ("unknown", "connected", "failing", "down")]


class MCPServer(models.Model):
    """One MCP server, shaped like an entry of Hermes' ``mcp_servers`` (SPEC §13.6).

    The configuration fields are written by staff through the admin form or a config.yaml import
    (validated and audited by ``compression.mcp_config``); the state fields below them are written
    by the workers that connect to the server, never by a form. ``env`` and ``headers`` hold a
    JSON object as text, encrypted at rest, and are never rendered back.
    """

    name = models.CharField(max_length=40, unique=True,
                            help_text="Letters, digits, _ and -, starting with a letter or a digit; the tools are offered as mcp_NAME_TOOL.")
    transport = models.CharField(max_length=5, choices=MCP_TRANSPORTS, default="stdio")
    command = models.CharField(max_length=500, blank=True, default="", help_text="stdio: the executable to start.")
    args = models.JSONField(default=list, blank=True, help_text="stdio: the arguments, a list of strings.")
    env = EncryptedTextField("environment", blank=True, default="",
                             help_text="stdio: the environment the server gets (a JSON object), besides a minimal PATH.")
    url = models.CharField("URL", max_length=500, blank=True, default="", help_text="HTTP: the MCP endpoint.")
    headers = EncryptedTextField(blank=True, default="", help_text="HTTP: request headers (a JSON object).")
    enabled = models.BooleanField(default=True)
    timeout = models.FloatField(default=120, help_text="Seconds one tool call may take.")
    connect_timeout = models.FloatField(default=60, help_text="Seconds to start and connect.")
    tools_include = models.JSONField(default=list, blank=True, help_text="Offer only these tools (empty: all).")
    tools_exclude = models.JSONField(default=list, blank=True, help_text="Never offer these tools.")
    generation = models.PositiveIntegerField(default=0, help_text="Raised by every change and by Reload: workers reconnect.")
    # State, written by the workers.
    state = models.CharField(max_length=10, choices=MCP_STATES, default="unknown")
    tools = models.JSONField(default=list, blank=True,
                             help_text="The tools the server listed: [{name, description, input_schema}].")
    state_generation = models.PositiveIntegerField(default=0, help_text="The generation the state describes.")
    failures = models.PositiveIntegerField(default=0, help_text="Consecutive failed starts or calls.")
    last_error = models.TextField(blank=True, default="")
    last_latency_ms = models.FloatField(null=True, blank=True)
    checked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["name"]
        verbose_name = "MCP server"

    def __str__(self) -> str:
        return self.name
