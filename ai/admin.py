"""The contrib's tables in the game's Django admin (Evennia's admin is Django's ``admin.site``).

Every table is written by the contrib's code, which keeps invariants across rows: a history
row's position and its counter's totals, a compaction's links to what it replaced, the
journal's word index, a memory's copy in Mem0. So the tables are shown read-only; only a
goal's priority may be changed here (the rest of a goal goes through ``aigoal``).
"""

from django.contrib import admin

from .models import (
    CompactionRecord,
    ConversationMessage,
    EntityObservation,
    Goal,
    HistoryCounter,
    JournalEntry,
    JournalWord,
    MemoryLink,
    TickUsage,
    TokenCalibration,
    ToolOffering,
    WorkingMemory,
)

# Filters by the assistant (character or script) that owns a row, listing only owners.
BY_ASSISTANT = ("db_object", admin.RelatedOnlyFieldListFilter)
BY_SCRIPT = ("db_script", admin.RelatedOnlyFieldListFilter)


class AudienceFilter(admin.SimpleListFilter):
    """Filter rows by audience: public (anyone may hear) or private (whispered)."""

    title = "audience"
    parameter_name = "audience"
    field = "audience"

    def lookups(self, request, model_admin):
        return (("public", "public"), ("private", "private"))

    def queryset(self, request, queryset):
        if self.value() in ("public", "private"):
            return queryset.filter(**{f"{self.field}__isnull": self.value() == "public"})
        return queryset


class MessageAudienceFilter(AudienceFilter):
    """Filter history rows by audience, which a message keeps in its metadata."""

    field = "metadata__audience"


class ReadOnlyAdmin(admin.ModelAdmin):
    """A table shown, never added to, changed or deleted from."""

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(ConversationMessage)
class ConversationMessageAdmin(ReadOnlyAdmin):
    list_display = ("id", "db_script", "position", "role", "token_count", "is_live", "pinned")
    list_filter = (BY_SCRIPT, MessageAudienceFilter, "role", "is_live", "pinned")
    search_fields = ("content",)
    raw_id_fields = ("db_script", "replaced_by", "made_by")


@admin.register(CompactionRecord)
class CompactionRecordAdmin(ReadOnlyAdmin):
    list_display = ("id", "db_script", "kind", "strategy", "created_at", "undone_at")
    list_filter = (BY_SCRIPT, "kind", "strategy")


@admin.register(TickUsage)
class TickUsageAdmin(ReadOnlyAdmin):
    list_display = ("id", "db_script", "created_at", "tokens", "max_tokens", "status", "asleep")
    list_filter = (BY_SCRIPT, "status", "asleep")


@admin.register(HistoryCounter)
class HistoryCounterAdmin(ReadOnlyAdmin):
    list_display = ("db_script", "live_count", "live_tokens", "next_position", "counted_for")


@admin.register(TokenCalibration)
class TokenCalibrationAdmin(ReadOnlyAdmin):
    list_display = ("model", "factor", "updated")
    search_fields = ("model",)


@admin.register(ToolOffering)
class ToolOfferingAdmin(ReadOnlyAdmin):
    list_display = ("model", "reason", "updated")
    search_fields = ("model",)


@admin.register(JournalEntry)
class JournalEntryAdmin(ReadOnlyAdmin):
    list_display = (
        "id",
        "db_object",
        "entry_id",
        "source_type",
        "importance",
        "audience",
        "consolidated",
        "archived",
    )
    list_filter = (BY_ASSISTANT, AudienceFilter, "source_type", "consolidated", "archived")
    search_fields = ("entry_id", "content")


@admin.register(JournalWord)
class JournalWordAdmin(ReadOnlyAdmin):
    list_display = ("word", "entry", "db_object_id")
    search_fields = ("word",)


@admin.register(EntityObservation)
class EntityObservationAdmin(ReadOnlyAdmin):
    list_display = ("id", "db_object", "entity_name", "text", "audience", "invalid_at")
    list_filter = (BY_ASSISTANT, AudienceFilter)
    search_fields = ("entity_name", "text")


@admin.register(MemoryLink)
class MemoryLinkAdmin(ReadOnlyAdmin):
    list_display = ("id", "db_object", "memory_id", "text", "audience", "invalid_at")
    list_filter = (BY_ASSISTANT, AudienceFilter)
    search_fields = ("text", "memory_id")


@admin.register(WorkingMemory)
class WorkingMemoryAdmin(ReadOnlyAdmin):
    list_display = ("db_object", "speaker_name", "turns", "last_active")
    list_filter = (BY_ASSISTANT,)


@admin.register(Goal)
class GoalAdmin(admin.ModelAdmin):
    """Goals: only the priority may change (status changes close parents: use ``aigoal``)."""

    list_display = ("id", "db_object", "text", "status", "priority", "source", "audience")
    list_filter = (BY_ASSISTANT, AudienceFilter, "status", "source")
    search_fields = ("text",)
    readonly_fields = tuple(
        field.name for field in Goal._meta.fields if field.name not in ("id", "priority")
    )

    def has_add_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False
