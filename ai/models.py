"""Tables of the assistant: its conversation history, one row per message.

History is never kept as a list in ``script.db``: such a list is re-pickled and rewritten
whole on every append. Here an append is one INSERT and one counter UPDATE, and the
running token total lives in :class:`HistoryCounter`, so a threshold check is one read.
Text from players and models is kept in fields that store NUL characters, which PostgreSQL
would refuse (see ``ai.fields``).
"""

from django.db import models
from django.db.models import Q
from django.utils import timezone

from .fields import NulSafeCharField, NulSafeJSONField, NulSafeTextField


class ConversationMessage(models.Model):
    """One chat message of an assistant's conversation history.

    Live messages are what the next LLM call sees; archived ones were replaced by a summary
    (``replaced_by``) and are kept for inspection rather than deleted.
    """

    # Its index is the first column of ``ai_script_position_idx`` (Meta).
    db_script = models.ForeignKey(
        "scripts.ScriptDB", on_delete=models.CASCADE, related_name="ai_messages", db_index=False
    )
    position = models.BigIntegerField(help_text="Order within the script's history.")
    role = models.CharField(max_length=16)
    content = NulSafeTextField(null=True, blank=True)
    name = NulSafeCharField(max_length=128, null=True, blank=True)
    tool_calls = NulSafeJSONField(null=True, blank=True)
    tool_call_id = NulSafeCharField(max_length=128, null=True, blank=True)
    metadata = NulSafeJSONField(default=dict, blank=True)
    token_count = models.PositiveIntegerField(help_text="Tokens this message costs when sent.")
    created_at = models.DateTimeField(default=timezone.now)
    is_live = models.BooleanField(default=True)
    # No constraint in the database: checked row by row, it doubled a compaction's one
    # archiving UPDATE (15,000 rows: about 50 ms more on SQLite). Only the history store
    # writes the link, to a message it stored in the same transaction (a summary, or the
    # result a sub-agent's archived work stands under); deleting one through Django still
    # clears it (SET_NULL is Django's, not the database's). Its index is partial (Meta):
    # only archived rows are in it.
    replaced_by = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        db_constraint=False,
        db_index=False,
        related_name="replaced",
        help_text="The summary that replaced this message when it was compacted.",
    )
    made_by = models.ForeignKey(
        "CompactionRecord",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="made",
        help_text="The compaction that wrote this message (a summary or a placeholder).",
    )
    pinned = models.BooleanField(
        default=False, help_text="Never compacted or masked (see ``aicompact/pin``)."
    )

    class Meta:
        # A summary takes the position of the first message it replaces, so live positions
        # are unique but an archived message may share its position with its summary.
        ordering = ("position", "id")
        indexes = [
            # Partial: a compaction's archiving UPDATE only removes each row it archives,
            # where an index holding ``is_live`` moved it (15,000 rows on SQLite: about 40%
            # of the statement; see docs/benchmarks.md). SQLite uses it only where a query
            # names the bare column, as the condition is written (``is_live``, not
            # ``is_live = 1``): the ORM's ``is_live=True`` does; ``ai.history`` does so.
            models.Index(
                fields=("db_script", "position"),
                name="ai_live_idx",
                condition=models.Q(is_live=True),
            ),
            # Every row, archived ones in order (``search_history``, ``aihistory``); it also
            # serves as the foreign key's index.
            models.Index(fields=("db_script", "position"), name="ai_script_position_idx"),
            # Partial: the archiving UPDATE of a compaction adds each row it archives, where
            # a whole index also removed it from the NULLs (15,000 rows on SQLite: about 30
            # ms instead of 43; see docs/benchmarks.md). A lookup by summary (``= id``)
            # implies the condition, so SQLite and PostgreSQL both use it.
            models.Index(
                fields=("replaced_by",),
                name="ai_replaced_by_idx",
                condition=models.Q(replaced_by__isnull=False),
            ),
        ]

    def __str__(self):
        return f"#{self.position} {self.role}: {(self.content or '')[:40]}"


class CompactionRecord(models.Model):
    """One compaction of a script's history: what it was and whether it was undone.

    The messages it wrote link to it (``ConversationMessage.made_by``) and the messages they
    replaced link to those (``replaced_by``), so ``aicompact/undo`` can put them back.
    """

    db_script = models.ForeignKey(
        "scripts.ScriptDB", on_delete=models.CASCADE, related_name="ai_compactions"
    )
    kind = models.CharField(max_length=16, help_text="sleep, emergency or manual.")
    strategy = models.CharField(max_length=16, help_text="The compact_strategy that ran.")
    created_at = models.DateTimeField(default=timezone.now)
    undone_at = models.DateTimeField(null=True, blank=True)
    result = models.JSONField(default=dict, blank=True, help_text="Its figures, as reported.")

    class Meta:
        ordering = ("id",)
        indexes = [models.Index(fields=("db_script", "id"), name="ai_compaction_idx")]

    def __str__(self):
        return f"{self.kind} {self.strategy} compaction at {self.created_at:%Y-%m-%d %H:%M}"


class TickUsage(models.Model):
    """How full one script's context was after one tick, and what the tick did.

    One row a tick (see ``ai.usage_history``), the newest ``usage_history_rows`` kept per
    script: the history of usage that the usage chart draws (``ai.usage_chart``).
    """

    db_script = models.ForeignKey(
        "scripts.ScriptDB", on_delete=models.CASCADE, related_name="ai_tick_usage"
    )
    created_at = models.DateTimeField(default=timezone.now)
    tokens = models.PositiveIntegerField(
        help_text="Tokens of the next call, as the tick last measured them."
    )
    max_tokens = models.PositiveIntegerField(help_text="The context limit at the time.")
    status = models.CharField(max_length=32, help_text="The tick's status: replied, idle...")
    asleep = models.BooleanField(default=False, help_text="Asleep once the tick was over.")

    class Meta:
        ordering = ("id",)
        # Rows are written in time order, so id order is time order: the chart reads, and
        # the prune counts back, the newest rows of one script along this index.
        indexes = [models.Index(fields=("db_script", "id"), name="ai_tick_usage_idx")]

    def __str__(self):
        return f"{self.status}: {self.tokens}/{self.max_tokens} at {self.created_at:%H:%M:%S}"


class PendingEvent(models.Model):
    """One event waiting for an assistant's tick: a player's line, an arrival, a gift...

    A row each (``ai.event_queue``), taken oldest first: queuing or taking one writes one
    row, where an attribute holding the list was pickled whole on each (about 1 ms a time,
    twice a tick; docs/benchmarks.md).
    """

    db_script = models.ForeignKey(
        "scripts.ScriptDB", on_delete=models.CASCADE, related_name="ai_pending_events"
    )
    event = NulSafeJSONField(help_text="The event: a dict with at least 'type'.")

    class Meta:
        ordering = ("id",)
        indexes = [models.Index(fields=("db_script", "id"), name="ai_pending_event_idx")]

    def __str__(self):
        return f"{self.event.get('type', '?')} for script {self.db_script_id}"


class ModelRun(models.Model):
    """One run of the tool loop that called the model: when, its context, how many calls
    and why it stopped (``helpers.call_log``), the newest few kept per script."""

    db_script = models.ForeignKey(
        "scripts.ScriptDB", on_delete=models.CASCADE, related_name="ai_model_runs"
    )
    created_at = models.DateTimeField(default=timezone.now)
    context = models.CharField(max_length=32, help_text="The context the run's calls ran in.")
    calls = models.PositiveSmallIntegerField(help_text="Model calls the run made.")
    stop_reason = models.CharField(max_length=32)
    audience = models.JSONField(
        null=True, blank=True, help_text="Dbrefs who could hear the turn; null for anyone."
    )

    class Meta:
        ordering = ("id",)
        indexes = [models.Index(fields=("db_script", "id"), name="ai_model_run_idx")]

    def __str__(self):
        return f"{self.context}: {self.calls} call(s), {self.stop_reason}"


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
    revision = models.BigIntegerField(
        default=0,
        help_text="Raised by a random step on every write, so a copy of the live history "
        "held in memory knows it is current (see ``ai.history``).",
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


class ToolOffering(models.Model):
    """How a model is offered tools when its options leave it to the contrib: a row means
    listed in the prompt as text, since the model showed it cannot use them natively (see
    ``ai.tool_offering``)."""

    model = models.CharField(max_length=255, unique=True)
    reason = NulSafeTextField(help_text="What the model did that made the switch.")
    updated = models.DateTimeField(auto_now=True)

    def __str__(self):
        return f"{self.model}: tools as text ({self.reason})"


class JournalEntry(models.Model):
    """One entry of an assistant's journal, in the seeds' format (see ``helpers.journal``).

    A table rather than a list in ``character.db``: a write is one INSERT whatever the
    journal's length, and a search reads only the entries that share a word with it.
    """

    db_object = models.ForeignKey(
        "objects.ObjectDB", on_delete=models.CASCADE, related_name="ai_journal"
    )
    entry_id = models.CharField(max_length=128, help_text="The seeds' id, journal_<time>...")
    timestamp = models.DateTimeField(default=timezone.now)
    content = NulSafeTextField()
    normalized = models.CharField(
        max_length=64, help_text="Digest of the content, to find a repeat."
    )
    source_type = models.CharField(max_length=32)
    importance = models.PositiveSmallIntegerField(default=5)
    tags = NulSafeJSONField(default=list, blank=True)
    source_message_ids = models.JSONField(default=list, blank=True)
    audience = models.JSONField(
        null=True, blank=True, help_text="Dbrefs who may hear it; null for anyone."
    )
    consolidated = models.BooleanField(
        default=False, help_text="Copied into long-term memory (see ``sleep.consolidation``)."
    )
    score = models.FloatField(
        null=True, blank=True, help_text="Importance score 0-10 (see ``ai.importance_scoring``)."
    )
    archived = models.BooleanField(
        default=False, help_text="Left the active journal (episodic prune); kept, not deleted."
    )
    model_scored = models.BooleanField(
        default=False, help_text="Its score includes the model's rating; not rated again."
    )
    cites = models.JSONField(
        default=list, blank=True, help_text="An insight's sources: the entry ids it came from."
    )
    reflected = models.BooleanField(
        default=False,
        help_text="Covered by a reflection, or never to be (insights, syntheses; see "
        "``ai.reflection``).",
    )

    class Meta:
        ordering = ("id",)
        # Partial indexes, whose conditions are written as the queries write them: Django
        # renders ``consolidated=False`` as ``NOT "consolidated"``, which no index on the
        # column serves, so a plain index left SQLite reading every entry of the journal.
        indexes = [
            # The entries the next consolidation takes.
            models.Index(
                fields=("db_object", "id"),
                condition=Q(consolidated=False),
                name="ai_entry_pending_idx",
            ),
            # The active, consolidated entries the episodic prune judges, by score; their
            # age is read from the index too, so recent entries cost no table reads.
            models.Index(
                fields=("db_object", "score", "timestamp"),
                condition=Q(consolidated=True, archived=False),
                name="ai_entry_prune_age_idx",
            ),
            # The entries the next reflection covers, whose importance an idle tick adds up.
            models.Index(
                fields=("db_object", "id"),
                condition=Q(reflected=False),
                name="ai_entry_unreflected_idx",
            ),
            # A repeat of one journal's entry (``find_same``), read in id order from the index.
            models.Index(fields=("db_object", "normalized"), name="ai_entry_normalized_idx"),
        ]
        constraints = [
            models.UniqueConstraint(fields=("db_object", "entry_id"), name="ai_entry_id_unique")
        ]

    def __str__(self):
        return f"{self.entry_id}: {self.content[:40]}"


class JournalWord(models.Model):
    """One word of one journal entry: the inverted index that journal search reads."""

    entry = models.ForeignKey(JournalEntry, on_delete=models.CASCADE, related_name="words")
    db_object_id = models.IntegerField(help_text="The entry's owner, to search one journal.")
    word = models.CharField(max_length=64)

    class Meta:
        # One word's entries newest first, so a search reads only as many as it takes.
        indexes = [
            models.Index(fields=("db_object_id", "word", "entry"), name="ai_journal_word_entry_idx")
        ]


class EntityObservation(models.Model):
    """One thing an assistant observed about someone or something (its entity profile).

    A profile is the observations of one entity, newest last (see
    ``helpers.entity_context``); what was observed in private keeps its ``audience``.
    """

    db_object = models.ForeignKey(
        "objects.ObjectDB", on_delete=models.CASCADE, related_name="ai_observations"
    )
    entity = models.CharField(max_length=32, help_text="The observed entity's dbref.")
    entity_name = models.CharField(max_length=255)
    text = NulSafeTextField()
    timestamp = models.DateTimeField(default=timezone.now)
    source_message_ids = models.JSONField(default=list, blank=True)
    audience = models.JSONField(
        null=True, blank=True, help_text="Dbrefs who may hear it; null for anyone."
    )
    invalid_at = models.DateTimeField(
        null=True, blank=True, help_text="When a newer observation superseded it."
    )
    superseded_by = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="supersedes"
    )
    consolidated = models.BooleanField(
        default=False, help_text="Seen by an entity consolidation batch."
    )

    class Meta:
        ordering = ("id",)
        indexes = [models.Index(fields=("db_object", "entity", "id"), name="ai_observation_idx")]

    def __str__(self):
        return f"{self.entity_name}: {self.text[:40]}"


class MemoryLink(models.Model):
    """One long-term (Mem0) memory an assistant made from a journal entry.

    The link ties the memory to its entry and, through the entry's ``source_message_ids``,
    to the history messages it came from. A row is written before the memory is added
    (``memory_id`` empty until Mem0 answers), so a reload mid-add finds the memory again
    instead of adding it twice. Supersession lives here: a fact that a newer one replaced
    keeps its text, with ``invalid_at`` and ``superseded_by`` saying when and by what.
    """

    db_object = models.ForeignKey(
        "objects.ObjectDB", on_delete=models.CASCADE, related_name="ai_memories"
    )
    memory_id = models.CharField(
        max_length=64, blank=True, default="", db_index=True, help_text="Mem0's id."
    )
    entry = models.ForeignKey(
        JournalEntry, null=True, blank=True, on_delete=models.SET_NULL, related_name="memories"
    )
    text = NulSafeTextField()
    audience = models.JSONField(
        null=True, blank=True, help_text="Dbrefs who may hear it; null for anyone."
    )
    valid_from = models.DateTimeField(default=timezone.now)
    invalid_at = models.DateTimeField(null=True, blank=True)
    superseded_by = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="supersedes"
    )
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ("id",)
        indexes = [models.Index(fields=("db_object", "id"), name="ai_memory_owner_idx")]

    def __str__(self):
        return f"{self.memory_id or 'pending'}: {self.text[:40]}"


class WorkingMemory(models.Model):
    """What an assistant holds about one ongoing conversation with one speaker.

    Kept while the speaker keeps talking; ``clear_stale_conversations`` removes it once the
    conversation has been quiet for ``working_memory_ttl`` seconds.
    """

    db_object = models.ForeignKey(
        "objects.ObjectDB", on_delete=models.CASCADE, related_name="ai_working_memory"
    )
    speaker = models.CharField(max_length=32, help_text="The speaker's dbref.")
    speaker_name = models.CharField(max_length=255)
    started_at = models.DateTimeField(default=timezone.now)
    last_active = models.DateTimeField(default=timezone.now, db_index=True)
    turns = models.PositiveIntegerField(default=0)
    recent = NulSafeJSONField(
        default=list, blank=True, help_text="The last lines heard: kind, words and audience each."
    )

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=("db_object", "speaker"), name="ai_working_unique")
        ]

    def __str__(self):
        return f"{self.speaker_name}: {self.turns} turns"


GOAL_STATUSES = ("active", "done", "blocked", "dropped")
GOAL_SOURCES = ("builder", "player", "self", "decomposition")


class Goal(models.Model):
    """One goal of an assistant: a node of its goal tree (see ``helpers.goals``).

    A goal is never deleted: it is done, blocked (with a reason) or dropped, and kept. A
    goal asked for in a whisper keeps that whisper's ``audience``, as journal entries do.
    """

    db_object = models.ForeignKey(
        "objects.ObjectDB", on_delete=models.CASCADE, related_name="ai_goals"
    )
    parent = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.CASCADE, related_name="children"
    )
    text = NulSafeTextField()
    status = models.CharField(max_length=16, default="active")
    priority = models.PositiveSmallIntegerField(default=5, help_text="1 (low) to 10 (urgent).")
    source = models.CharField(max_length=16, help_text="builder, player, self or decomposition.")
    audience = models.JSONField(
        null=True, blank=True, help_text="Dbrefs who may hear it; null for anyone."
    )
    origin = NulSafeCharField(
        max_length=255, blank=True, default="", help_text="What it came from: who, or what."
    )
    reason = NulSafeTextField(
        blank=True, default="", help_text="Why it is blocked or dropped, or done with its steps."
    )
    decompose_failures = models.PositiveSmallIntegerField(
        default=0, help_text="Unusable decompositions in a row (their retries back off)."
    )
    turns = models.PositiveSmallIntegerField(
        default=0, help_text="Autonomous turns spent on it since it was last made active."
    )
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ("id",)
        indexes = [models.Index(fields=("db_object", "status"), name="ai_goal_status_idx")]

    def __str__(self):
        return f"#{self.id} {self.status}: {self.text[:40]}"
