"""The conversation history store of one assistant script.

Every write keeps :class:`~ai.models.HistoryCounter` in step in the same transaction, so
the live token total and message count are read in O(1) whatever the history's length.
Each message is validated before it is stored and its token count computed once.
"""

import json

from django.db import connection, transaction
from django.db.models import F

from .models import ConversationMessage, HistoryCounter
from .utils.message_format import validate_message
from .utils.token_counter import count_message_tokens, counting_key

_COUNTER_TABLE = HistoryCounter._meta.db_table
_MESSAGE_TABLE = ConversationMessage._meta.db_table
_COLUMNS = (
    "id",
    "position",
    "role",
    "content",
    "name",
    "tool_calls",
    "tool_call_id",
    "metadata",
    "token_count",
)
_SELECT_MESSAGES = f"SELECT {', '.join(_COLUMNS)} FROM {_MESSAGE_TABLE} WHERE db_script_id = %s"


def _json(value):
    """Return a JSON column's value decoded, whether the driver gave text or objects."""
    if not isinstance(value, (str, bytes)):
        return value
    # Most messages carry no metadata: skip the decoder for the commonest value.
    return {} if value == "{}" else json.loads(value)


def _columns_to_message(columns):
    """Return one row's ``_COLUMNS`` values as a ``{role, content, ...}`` message dict."""
    row_id, position, role, content, name, tool_calls, tool_call_id, metadata, tokens = columns
    message = {"role": role, "content": content}
    if name:
        message["name"] = name
    tool_calls = _json(tool_calls)
    if tool_calls:
        message["tool_calls"] = tool_calls
    if tool_call_id:
        message["tool_call_id"] = tool_call_id
    message["metadata"] = _json(metadata) or {}
    message["id"] = row_id
    message["position"] = position
    message["token_count"] = tokens
    return message


def row_to_message(row):
    """Return a stored row as a ``{role, content, ...}`` dict, with its id and token count."""
    return _columns_to_message([getattr(row, column) for column in _COLUMNS])


class HistoryChanged(Exception):
    """The messages a compaction meant to replace are no longer all live."""


class ConversationHistory:
    """Read and append the live history of one script, counting tokens for one model.

    Args:
        script (ScriptDB): The assistant script that owns the history.
        model (str): The model whose tokenizer counts the messages.
    """

    def __init__(self, script, model):
        self.script = script
        self.model = model
        # Counts belong to a tokenizer and, for estimated ones, to a calibration.
        self.counted_for = counting_key(model)

    def _counter(self):
        counter, _ = HistoryCounter.objects.get_or_create(
            db_script_id=self.script.id, defaults={"counted_for": self.counted_for}
        )
        if counter.counted_for != self.counted_for:
            counter = self.recount()
        return counter

    def _claim_position(self, tokens):
        """Add one message of ``tokens`` to the counter and return its position.

        The counter is written before it is read, so concurrent appends queue on the write
        lock instead of failing on a read-then-write upgrade. Raw SQL on this hot path: the
        ORM's query building costs ten times the query itself (see docs/benchmarks.md).

        Returns:
            int or None: The position, or None when the counter is missing or was counted
            for another model.
        """
        with connection.cursor() as cursor:
            cursor.execute(
                f"UPDATE {_COUNTER_TABLE} SET live_tokens = live_tokens + %s, "
                "live_count = live_count + 1, next_position = next_position + 1 "
                "WHERE db_script_id = %s AND counted_for = %s",
                [tokens, self.script.id, self.counted_for],
            )
            if cursor.rowcount == 0:
                return None
            cursor.execute(
                f"SELECT next_position FROM {_COUNTER_TABLE} WHERE db_script_id = %s",
                [self.script.id],
            )
            return cursor.fetchone()[0] - 1

    def append(self, message):
        """Validate and store one message at the end of the live history.

        Args:
            message (dict): A ``{role, content, ...}`` message.

        Returns:
            dict: The stored message, with its ``id`` and ``token_count``.

        Raises:
            MessageValidationError: if the message is malformed; nothing is stored.
        """
        validate_message(message)
        tokens = count_message_tokens(message, self.model)
        with transaction.atomic():
            position = self._claim_position(tokens)
            if position is None:
                self._counter()
                position = self._claim_position(tokens)
            row = ConversationMessage.objects.create(
                db_script_id=self.script.id,
                position=position,
                role=message["role"],
                content=message.get("content"),
                name=message.get("name"),
                tool_calls=message.get("tool_calls") or None,
                tool_call_id=message.get("tool_call_id"),
                metadata=message.get("metadata") or {},
                token_count=tokens,
            )
        return row_to_message(row)

    def _read(self, condition, params):
        """Return the messages of this script matching the SQL ``condition``, oldest first.

        Raw SQL: at thousands of messages, the ORM's per-row conversion costs more than the
        query itself (see docs/benchmarks.md).
        """
        with connection.cursor() as cursor:
            cursor.execute(
                f"{_SELECT_MESSAGES} AND {condition} ORDER BY position, id",
                [self.script.id, *params],
            )
            return [_columns_to_message(columns) for columns in cursor.fetchall()]

    def replace_with_summaries(self, compacted, summaries):
        """Archive ``compacted`` and put summaries live in their place, atomically.

        Messages appended meanwhile are untouched: only the named rows change. The
        summaries take the positions of the first messages they replace, in order, and
        each replaced row links to the summary that stands for it.

        Args:
            compacted (list): A run of consecutive live messages read from this store
                (with ``id``, ``position`` and ``token_count``), oldest first.
            summaries (list): ``(summary message, the messages of compacted it replaces)``
                pairs, which together cover ``compacted``.

        Returns:
            list: The stored summary messages.

        Raises:
            HistoryChanged: if ``compacted`` is no longer exactly the live messages between
                its first and last position; nothing changes.
        """
        for message, _ in summaries:
            validate_message(message)
        first, last = compacted[0]["position"], compacted[-1]["position"]
        counted = [count_message_tokens(message, self.model) for message, _ in summaries]
        with transaction.atomic():
            rows = self.live_rows().filter(position__gte=first, position__lte=last)
            live = dict(rows.select_for_update().values_list("id", "token_count"))
            if set(live) != {message["id"] for message in compacted}:
                raise HistoryChanged("the messages to compact are no longer the live ones")
            # The stored counts, not those read before the summary call: a model change
            # meanwhile recounted them for the counter's new tokenizer.
            removed = sum(live.values())
            stored = []
            for offset, ((message, replaced), tokens) in enumerate(zip(summaries, counted)):
                summary = ConversationMessage.objects.create(
                    db_script_id=self.script.id,
                    position=first + offset,
                    role=message["role"],
                    content=message.get("content"),
                    metadata=message.get("metadata") or {},
                    token_count=tokens,
                )
                rows.filter(pk__in=[m["id"] for m in replaced]).update(
                    is_live=False, replaced_by=summary
                )
                stored.append(summary)
            HistoryCounter.objects.filter(db_script_id=self.script.id).update(
                live_tokens=F("live_tokens") - removed + sum(counted),
                live_count=F("live_count") - len(compacted) + len(stored),
            )
        return [row_to_message(summary) for summary in stored]

    def archived_by(self, summary_id):
        """Return the messages that the summary ``summary_id`` replaced, oldest first."""
        return self._read("replaced_by_id = %s", [summary_id])

    def live_rows(self):
        """Return a queryset of the live rows, oldest first."""
        return ConversationMessage.objects.filter(db_script_id=self.script.id, is_live=True)

    def messages(self):
        """Return the live history as a list of message dicts, oldest first."""
        return self._read("is_live = %s", [True])

    def totals(self):
        """Return ``(live_tokens, live_count)`` in one indexed read."""
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT live_tokens, live_count FROM {_COUNTER_TABLE} "
                "WHERE db_script_id = %s AND counted_for = %s",
                [self.script.id, self.counted_for],
            )
            row = cursor.fetchone()
        if row is None:
            counter = self._counter()
            return counter.live_tokens, counter.live_count
        return row[0], row[1]

    def token_total(self):
        """Return the tokens of the live history as it would be sent."""
        return self.totals()[0]

    def __len__(self):
        return self.totals()[1]

    def recount(self):
        """Recount every live message for this store's model and reset the totals.

        Called once when the assistant's model changes, since stored counts belong to the
        tokenizer that made them.

        Returns:
            HistoryCounter: The refreshed counter.
        """
        with transaction.atomic():
            counter, _ = HistoryCounter.objects.get_or_create(db_script_id=self.script.id)
            total = count = 0
            for row in self.live_rows():
                tokens = count_message_tokens(row_to_message(row), self.model)
                if tokens != row.token_count:
                    ConversationMessage.objects.filter(pk=row.pk).update(token_count=tokens)
                total += tokens
                count += 1
            last = (
                ConversationMessage.objects.filter(db_script_id=self.script.id)
                .order_by("-position")
                .values_list("position", flat=True)
                .first()
            )
            counter.live_tokens = total
            counter.live_count = count
            counter.next_position = 0 if last is None else last + 1
            counter.counted_for = self.counted_for
            counter.save()
        return counter

    def clear(self):
        """Delete the whole history of this script (live and archived)."""
        with transaction.atomic():
            ConversationMessage.objects.filter(db_script_id=self.script.id).delete()
            HistoryCounter.objects.filter(db_script_id=self.script.id).update(
                live_tokens=0, live_count=0
            )
