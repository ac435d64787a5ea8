"""Conversations, the sessions the model sees, their messages, compression events and API usage.

Nothing here is ever deleted by compression: rotation ends a session and starts a child; in-place
compaction archives rows. The transcript a user sees is every visible message of the conversation
in id order; the context the model sees is the active session's unarchived messages in `seq` order.
"""
from __future__ import annotations

import uuid
from pathlib import Path

from django.conf import settings
from django.db import models, transaction
from django.db.models.signals import post_delete
from django.dispatch import receiver
from django.utils import timezone

from compression.core.base import parse_chunk_phase
from compression.core.markers import SUMMARY_KEY
from compression.core.tokens import TOKENS_KEY
from sessions.models_limits import LimitDefaults as LimitDefaults  # the limits' models, registered with these
from sessions.models_limits import UsageDay as UsageDay
from sessions.models_limits import UserLimits as UserLimits

DEFAULT_TITLE = "New conversation"


class Conversation(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="conversations")
    title = models.CharField(max_length=200, default=DEFAULT_TITLE)
    title_manual = models.BooleanField(default=False, help_text="Set by the user: never replaced by a made title.")
    provider = models.CharField(max_length=40, default="simulator")
    model = models.CharField(max_length=100, default="sim-claude-200k")
    context_length = models.PositiveIntegerField(null=True, blank=True, help_text="Overrides the model's window.")
    max_tokens = models.PositiveIntegerField(default=4096)
    mcp_off = models.JSONField(default=list, blank=True,
                               help_text="Names of the MCP servers switched off for this conversation.")
    created_at = models.DateTimeField(default=timezone.now)
    last_activity_at = models.DateTimeField(default=timezone.now)

    class Meta:
        indexes = [models.Index(fields=["owner", "-last_activity_at"])]

    def __str__(self) -> str:
        return self.title

    @property
    def workspace(self):
        return settings.HERMES_WORKSPACES_DIR / str(self.id)


class Session(models.Model):
    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="sessions")
    parent = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="children")
    started_at = models.DateTimeField(default=timezone.now)
    ended_at = models.DateTimeField(null=True, blank=True)
    end_reason = models.CharField(max_length=40, blank=True)
    system_prompt = models.TextField(blank=True)
    # Compression state, restored into a fresh engine instance for every turn or job.
    compression_count = models.PositiveIntegerField(default=0)
    previous_summary = models.TextField(blank=True)
    cooldown_until = models.FloatField(null=True, blank=True, help_text="Unix time; automatic compression waits.")
    ineffective_count = models.PositiveIntegerField(default=0)
    last_prompt_tokens = models.IntegerField(default=0, help_text="-1: compressed, waiting for real usage.")
    engine_state = models.JSONField(default=dict, blank=True, help_text="The rest of the engine's exported state.")
    context_length = models.PositiveIntegerField(null=True, blank=True, help_text="Lowered by an overflow error.")
    counted_prompt_tokens = models.PositiveIntegerField(
        default=0, help_text="The counted size of the request whose real prompt is last_prompt_tokens.")
    last_call_at = models.DateTimeField(
        null=True, blank=True, help_text="When the session's last model call ended: the age of its prompt cache.")

    class Meta:
        indexes = [models.Index(fields=["conversation", "ended_at"])]

    @property
    def is_active(self) -> bool:
        return self.ended_at is None


class Message(models.Model):
    ROLES = [(r, r) for r in ("user", "assistant", "tool", "system")]

    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="messages")
    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="messages")
    seq = models.PositiveIntegerField()
    role = models.CharField(max_length=10, choices=ROLES)
    content = models.JSONField(null=True, blank=True)
    tool_calls = models.JSONField(null=True, blank=True)
    tool_call_id = models.CharField(max_length=100, blank=True)
    name = models.CharField(max_length=100, blank=True)
    token_count = models.PositiveIntegerField(default=0, help_text="Counted once when stored.")
    archived = models.BooleanField(default=False, help_text="Compacted away; kept for the transcript and recall.")
    is_summary = models.BooleanField(default=False)
    visible = models.BooleanField(default=True, help_text="False for copies carried into a new context.")
    stopped = models.BooleanField(default=False, help_text="A reply cut short by Stop: the text that had arrived.")
    replaced = models.BooleanField(default=False, help_text="Replaced by a regenerated reply or an edited "
                                   "message: archived, kept in the transcript.")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["id"]
        indexes = [
            models.Index(fields=["session", "archived", "seq"]),
            models.Index(fields=["conversation", "visible", "id"]),
        ]
        # One order for a session's context: allocated by message_append under a lock.
        constraints = [models.UniqueConstraint(fields=["session", "seq"], name="message_seq_unique_per_session")]

    def as_chat(self) -> dict:
        """The internal OpenAI-style message, with its stored token count as metadata."""
        msg: dict = {"role": self.role, "content": self.content}
        if self.tool_calls:
            msg["tool_calls"] = self.tool_calls
        if self.tool_call_id:
            msg["tool_call_id"] = self.tool_call_id
        if self.name:
            msg["name"] = self.name
        if self.is_summary:
            msg[SUMMARY_KEY] = True
        msg[TOKENS_KEY] = self.token_count
        return msg


class Turn(models.Model):
    """One request of the user to the agent. A queued turn holds the text as sent; it enters the
    model's history (as `user_message`) only when the turn starts, after the turns before it.
    A regenerate or retry turn answers the user message already in the history."""

    STATUS = [(s, s) for s in ("queued", "running", "done", "failed", "stopped", "cancelled")]
    FINISHED = ("done", "failed", "stopped", "cancelled")
    KINDS = [(k, k) for k in ("message", "regenerate", "edit")]

    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="turns")
    user_message = models.ForeignKey(Message, null=True, on_delete=models.SET_NULL, related_name="+")
    kind = models.CharField(max_length=12, choices=KINDS, default="message")
    text = models.TextField(blank=True, help_text="The message as sent, stored until the turn starts.")
    status = models.CharField(max_length=10, choices=STATUS, default="queued")
    error = models.TextField(blank=True, help_text="Why the turn failed, in words for the user.")
    stop_requested = models.BooleanField(default=False)
    # The reply streamed so far (null while no stream is open), saved about once a second, so a
    # page loaded mid-stream shows it; `iterations` then names the stream (`stream-<id>-<n>`).
    partial_text = models.TextField(null=True, blank=True)
    iterations = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["conversation", "status", "id"])]

    @property
    def stream_id(self) -> str:
        return f"stream-{self.id}-{self.iterations}"

    @property
    def shown_text(self) -> str:
        """What the user asked: the stored message once the turn started, the queued text before
        (a message with attachments: its text part)."""
        if self.user_message_id and self.user_message is not None:
            content = self.user_message.content
            if isinstance(content, list):
                return next((str(p.get("text") or "") for p in content if isinstance(p, dict) and p.get("type") == "text"), "")
            return content if isinstance(content, str) else ""
        return self.text


class Attachment(models.Model):
    """A file the user attached to a message (sessions/services/attachments.py). Pending while
    `turn` is null (uploaded, not sent yet); claimed by the turn that sends it; linked to the
    message once that turn's message enters the history. The original file is kept under
    HERMES_ATTACHMENTS_DIR (`storage`, a random name: the user's file name never reaches the
    file system there) and removed with the row."""

    KINDS = [("image", "image"), ("pdf", "pdf"), ("text", "text")]

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="attachments")
    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="attachments")
    turn = models.ForeignKey(Turn, null=True, blank=True, on_delete=models.SET_NULL, related_name="attachments")
    message = models.ForeignKey(Message, null=True, blank=True, on_delete=models.SET_NULL, related_name="attachments")
    kind = models.CharField(max_length=10, choices=KINDS)
    name = models.CharField(max_length=200, help_text="The file's name, sanitised.")
    size = models.PositiveBigIntegerField()
    media_type = models.CharField(max_length=100)
    width = models.PositiveIntegerField(null=True, blank=True, help_text="Of the original image.")
    height = models.PositiveIntegerField(null=True, blank=True)
    pages = models.PositiveIntegerField(null=True, blank=True)
    has_text = models.BooleanField(default=True, help_text="False for a PDF without a text layer.")
    sha256 = models.CharField(max_length=64)
    storage = models.CharField(max_length=200, help_text="Relative to HERMES_ATTACHMENTS_DIR.")
    workspace_name = models.CharField(max_length=255, blank=True,
                                      help_text="A text file: its name in the workspace, once written there.")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["id"]
        indexes = [models.Index(fields=["conversation", "owner", "turn"]), models.Index(fields=["turn", "created_at"])]

    def __str__(self) -> str:
        return self.name

    @property
    def path(self) -> Path:
        return Path(settings.HERMES_ATTACHMENTS_DIR) / self.storage

    @property
    def thumbnail_path(self) -> Path:
        return self.path.with_name(self.path.name + ".thumb")

    def files_remove(self) -> None:
        for path in (self.path, self.thumbnail_path):
            path.unlink(missing_ok=True)


@receiver(post_delete, sender=Attachment)
def _attachment_files_removed(sender, instance: Attachment, **kwargs) -> None:
    """The stored files go with the row (a conversation's or a user's deletion included), once
    the deletion committed."""
    transaction.on_commit(instance.files_remove)


class CompressionEvent(models.Model):
    TRIGGERS = [(t, t) for t in ("hygiene", "preflight", "post_response", "error_recovery", "manual", "admin", "idle")]
    # "deferred": cache-aware timing left a warm conversation to compact later (no compression ran).
    STATUS = [(s, s) for s in ("queued", "running", "compressed", "aborted", "noop", "failed", "skipped", "deferred")]

    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="compression_events")
    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="compression_events")
    new_session = models.ForeignKey(Session, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    summary_message = models.ForeignKey(Message, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    trigger = models.CharField(max_length=20, choices=TRIGGERS)
    status = models.CharField(max_length=12, choices=STATUS, default="running")
    phase = models.CharField(max_length=20, blank=True)
    reason = models.TextField(blank=True)
    focus_topic = models.CharField(max_length=500, blank=True)
    in_place = models.BooleanField(default=False)
    messages_before = models.PositiveIntegerField(default=0)
    messages_after = models.PositiveIntegerField(default=0)
    tokens_before = models.PositiveIntegerField(default=0)
    tokens_after = models.PositiveIntegerField(default=0)
    pruned_count = models.PositiveIntegerField(default=0)
    summarized_count = models.PositiveIntegerField(default=0)
    summary = models.TextField(blank=True)
    aux_model = models.CharField(max_length=100, blank=True)
    # What the summariser read (every summarised message, in `summariser_calls` calls) and, when the
    # auxiliary model failed and the main model summarised instead, why.
    messages_read = models.PositiveIntegerField(default=0)
    tokens_read = models.PositiveIntegerField(default=0)
    summariser_calls = models.PositiveIntegerField(default=0)
    aux_failure = models.TextField(blank=True)
    duration_ms = models.PositiveIntegerField(default=0)
    cost = models.DecimalField(max_digits=12, decimal_places=6, default=0)
    started_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-id"]
        indexes = [models.Index(fields=["conversation", "-id"]), models.Index(fields=["status", "started_at"])]

    @property
    def phase_label(self) -> str:
        """The phase in words; the summariser's chunks as "summarising chunk k of n"."""
        chunk = parse_chunk_phase(self.phase)
        return f"summarising chunk {chunk[0]} of {chunk[1]}" if chunk else self.phase


class ApiCall(models.Model):
    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="api_calls")
    session = models.ForeignKey(Session, null=True, on_delete=models.SET_NULL, related_name="api_calls")
    purpose = models.CharField(max_length=20, default="agent")  # agent | compression
    provider = models.CharField(max_length=40)
    model = models.CharField(max_length=100)
    input_tokens = models.PositiveIntegerField(default=0)
    output_tokens = models.PositiveIntegerField(default=0)
    cache_read_tokens = models.PositiveIntegerField(default=0)
    cache_write_tokens = models.PositiveIntegerField(default=0)
    cache_write_5m_tokens = models.PositiveIntegerField(default=0)
    cache_write_1h_tokens = models.PositiveIntegerField(default=0)
    prompt_tokens = models.PositiveIntegerField(default=0)
    cost = models.DecimalField(max_digits=12, decimal_places=6, default=0)
    cost_without_cache = models.DecimalField(max_digits=12, decimal_places=6, default=0)
    latency_ms = models.PositiveIntegerField(default=0)
    stop_reason = models.CharField(max_length=40, blank=True)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["id"]
        indexes = [models.Index(fields=["conversation", "id"]), models.Index(fields=["created_at"])]


class ConversationLock(models.Model):
    """A lease, acquired atomically, that expires on its own if its holder dies."""

    KINDS = [("compression", "compression"), ("turn", "turn")]

    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="+")
    kind = models.CharField(max_length=20, choices=KINDS)
    holder = models.CharField(max_length=100)
    expires_at = models.DateTimeField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["conversation", "kind"], name="one_lock_per_kind")]


class UserNotice(models.Model):
    """A one-time notice ``key`` has been shown to ``user`` (SPEC §4: the Codex autoraise notice is
    shown once per account). Deleting the row shows it again. The table predates this app's
    ownership of the model, hence its name."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="notices_shown")
    key = models.CharField(max_length=64)
    shown_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "staff_usernotice"
        constraints = [models.UniqueConstraint(fields=["user", "key"], name="one_notice_per_user_and_key")]

    def __str__(self) -> str:
        return f"{self.key} → {self.user}"


class UserPreference(models.Model):
    """What a user chose for the look of the app (the colour theme), kept with the account."""

    THEMES = [("auto", "Follow the system"), ("light", "Light"), ("dark", "Dark")]

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="preference")
    theme = models.CharField(max_length=10, choices=THEMES, default="auto")


class ModelTokenRatio(models.Model):
    """A model's measured ratio of real prompt tokens (the provider's usage) to counted ones (the
    stored tiktoken counts), as decayed sums updated after every response (SPEC §3.4)."""

    model = models.CharField(max_length=200, unique=True)
    real_sum = models.FloatField(default=0.0)
    counted_sum = models.FloatField(default=0.0)
    samples = models.PositiveIntegerField(default=0)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"{self.model}: {self.real_sum / self.counted_sum if self.counted_sum else 1.0:.3f}"


class ShareLink(models.Model):
    """A read-only link to a conversation (sessions/services/share.py). The URL carries a random
    token; only its SHA-256 is stored, so the table (a database dump included) cannot open a link.
    A link answers until it is revoked or its expiry passes; the workspace files are shown only
    when the owner chose so when creating it."""

    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="share_links")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    token_hash = models.CharField(max_length=64, unique=True, editable=False,
                                  help_text="SHA-256 of the link's token (hex); the token itself is never stored.")
    created_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField(null=True, blank=True, help_text="Empty: never expires.")
    revoked_at = models.DateTimeField(null=True, blank=True)
    include_workspace = models.BooleanField(default=False, help_text="The page lists the workspace files and "
                                            "serves them for download.")

    class Meta:
        ordering = ["-id"]
        indexes = [models.Index(fields=["conversation", "revoked_at"])]

    def __str__(self) -> str:
        return f"Share link {self.id} of “{self.conversation}”"

    def is_active(self, now=None) -> bool:
        now = now or timezone.now()
        return self.revoked_at is None and (self.expires_at is None or self.expires_at > now)
