"""Tables of the assistant: its conversation history, one row per message.

History is never kept as a list in ``script.db``: such a list is re-pickled and rewritten
whole on every append. Here an append is one INSERT and one counter UPDATE, and the
running token total lives in :class:`HistoryCounter`, so a threshold check is one read.
"""

from django.db import models
from django.utils import timezone


class ConversationMessage(models.Model):
    """One chat message of an assistant's conversation history.

    Live messages are what the next LLM call sees; archived ones were replaced by a summary
    (``replaced_by``) and are kept for inspection rather than deleted.
    """

    db_script = models.ForeignKey(
        "scripts.ScriptDB", on_delete=models.CASCADE, related_name="ai_messages"
    )
    position = models.BigIntegerField(help_text="Order within the script's history.")
    role = models.CharField(max_length=16)
    content = models.TextField(null=True, blank=True)
    name = models.CharField(max_length=128, null=True, blank=True)
    tool_calls = models.JSONField(null=True, blank=True)
    tool_call_id = models.CharField(max_length=128, null=True, blank=True)
    metadata = models.JSONField(default=dict, blank=True)
    token_count = models.PositiveIntegerField(help_text="Tokens this message costs when sent.")
    created_at = models.DateTimeField(default=timezone.now)
    is_live = models.BooleanField(default=True)
    replaced_by = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="replaced",
        help_text="The summary that replaced this message when it was compacted.",
    )

    class Meta:
        # A summary takes the position of the first message it replaces, so live positions
        # are unique but an archived message may share its position with its summary.
        ordering = ("position", "id")
        indexes = [models.Index(fields=("db_script", "is_live", "position"), name="ai_live_idx")]

    def __str__(self):
        return f"#{self.position} {self.role}: {(self.content or '')[:40]}"


class HistoryCounter(models.Model):
    """Running totals of one script's live history, kept in step with every write."""

    db_script = models.OneToOneField(
        "scripts.ScriptDB", on_delete=models.CASCADE, primary_key=True, related_name="ai_counter"
    )
    live_tokens = models.BigIntegerField(default=0)
    live_count = models.BigIntegerField(default=0)
    next_position = models.BigIntegerField(default=0)
    counted_for = models.CharField(
        max_length=255, default="", help_text="The model whose tokenizer made the counts."
    )

    def __str__(self):
        return f"{self.live_count} messages, {self.live_tokens} tokens"


class TokenCalibration(models.Model):
    """How far the token estimate of one model is from what its provider reports.

    Only models without an offline tokenizer are calibrated (see ``ai.token_calibration``).
    """

    model = models.CharField(max_length=255, unique=True)
    factor = models.FloatField(default=1.0, help_text="Applied to the model's estimated counts.")
    samples = models.JSONField(
        default=list, blank=True, help_text="Recent ratios of reported to estimated tokens."
    )
    updated = models.DateTimeField(auto_now=True)

    def __str__(self):
        return f"{self.model}: x{self.factor:.2f} ({len(self.samples)} samples)"
