"""The conversation history store of one assistant script.

Every write keeps :class:`~ai.models.HistoryCounter` in step in the same transaction, so
the live token total and message count are read in O(1) whatever the history's length.
Each message is validated before it is stored and its token count computed once.

A tick needs only the newest messages, as many as its prompt could send: ``recent`` keeps
them in memory between ticks (``script.ndb.live_tail``), extended by each append, and
trusts them only while the counter's ``revision`` is the one they were read at. Every
write raises that revision by a random step, so a write made elsewhere, or one rolled back
and followed by another, is never mistaken for the held copy's.
"""

import json
import random
from dataclasses import dataclass

from django.db import connection, transaction
from django.db.models import F
from django.utils import timezone
from twisted.internet import defer

from .audience import may_hear, message_audience
from .fields import restore_nul, restore_nul_json
from .models import ConversationMessage, HistoryCounter
from .prompt_assembly import history_units, unit_start
from .utils.message_format import StoredMessage, validate_message
from .utils.raw_rows import insert_row
from .utils.reactor_turns import in_turns
from .utils.thread_pools import LazyPool
from .utils.token_counter import count_message_tokens, counting_key, kept_message_tokens

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
    "pinned",
)
# Ids one query names at most: SQLite's older builds allow 999 parameters.
_IDS_PER_QUERY = 500
# Messages ``warm`` reads at a time, a step of ``ai.utils.reactor_turns``.
WARM_PAGE = 250
# Reads of many messages (a compaction's) run here, off the reactor, a page at a time: on
# SQLite (its rollback journal) a write from the reactor waits for a read's statement to
# end, so a page keeps that wait to a few milliseconds. One thread: the reads are short.
READS = LazyPool("ai-history-reads", lambda: 1)
READ_PAGE = 1000
# Messages read on each side of one to find its tool-call unit: more than a tick's calls.
_UNIT_SCAN = 64
# Live rows are named by the bare column, as the live index's condition is (``ai.models``):
# SQLite leaves a partial index aside for ``is_live = %s``, even ``is_live = 1``.
_SELECT_MESSAGES = f"SELECT {', '.join(_COLUMNS)} FROM {_MESSAGE_TABLE} WHERE db_script_id = %s"
_SELECT_OUTLINE = (
    "SELECT id, position, role, tool_calls, tool_call_id, token_count, pinned "
    f"FROM {_MESSAGE_TABLE} WHERE db_script_id = %s"
)


def _json(value):
    """Return a JSON column's value decoded, whether the driver gave text or objects."""
    if not isinstance(value, (str, bytes)):
        return value
    if isinstance(value, bytes):
        value = value.decode()
    return restore_nul_json(json.loads(value), value)


def _columns_to_message(columns, stored=True):
    """Return one row's ``_COLUMNS`` values as a ``{role, content, ...}`` message dict.

    Args:
        columns (sequence): The values.
        stored (bool): True for values as SQL read them, with NUL characters escaped (see
            ``ai.fields``); False for a model row's, which its fields restored.
    """
    row_id, position, role, content, name, tool_calls, tool_call_id, metadata, tokens, pinned = (
        columns
    )
    if stored:
        content, name, tool_call_id = map(restore_nul, (content, name, tool_call_id))
    message = StoredMessage(role=role, content=content)
    if name:
        message["name"] = name
    _add_tool_fields(message, tool_calls, tool_call_id)
    # Most messages carry no metadata: no decoder for those (a compaction reads thousands).
    message["metadata"] = {} if metadata == "{}" else _json(metadata) or {}
    message["id"] = row_id
    message["position"] = position
    message["token_count"] = tokens
    if pinned:
        message["pinned"] = True
    return message


def _columns_to_outline(columns):
    """Return the values of :meth:`ConversationHistory.newest_outline`'s columns as a dict."""
    row_id, position, role, tool_calls, tool_call_id, tokens, pinned = columns
    entry = {"id": row_id, "position": position, "role": role, "token_count": tokens}
    _add_tool_fields(entry, tool_calls, restore_nul(tool_call_id))
    if pinned:
        entry["pinned"] = True
    return entry


def _add_tool_fields(message, tool_calls, tool_call_id):
    """Put a row's tool calls (decoded only when there are some) and tool call id in
    ``message``, if it has them."""
    if tool_calls is not None:
        tool_calls = _json(tool_calls)
        if tool_calls:
            message["tool_calls"] = tool_calls
    if tool_call_id:
        message["tool_call_id"] = tool_call_id


def _row_fields(message):
    """Return the columns of a message's own fields (not its place, count or links)."""
    return {
        "role": message["role"],
        "content": message.get("content"),
        "name": message.get("name"),
        "tool_calls": message.get("tool_calls") or None,
        "tool_call_id": message.get("tool_call_id"),
        "metadata": message.get("metadata") or {},
    }


def row_to_message(row):
    """Return a stored row as a ``{role, content, ...}`` dict, with its id and token count."""
    return _columns_to_message([getattr(row, column) for column in _COLUMNS], stored=False)


def _updates_return_rows():
    """Tell whether the database returns the rows an UPDATE changed (``RETURNING``):
    PostgreSQL and SQLite from 3.35 do; MySQL does not."""
    return connection.vendor == "postgresql" or (
        connection.vendor == "sqlite" and connection.features.can_return_columns_from_insert
    )


def _revision_step():
    """Return how much one write raises the counter's revision: random, never zero."""
    return random.randrange(1, 2**31)


class HistoryChanged(Exception):
    """The messages a compaction meant to replace are no longer all live."""


class RecentHistory(list):
    """The newest live messages someone may hear, oldest first, and what came before them.

    Attributes:
        older_count (int): Live messages before the first of these (heard or not).
        older_tokens (int): Their tokens.
        revision (int or None): The counter's revision they were read at, where a caller
            needs it (:meth:`ConversationHistory.newest_outline`).
        tokens (int or None): The tokens of these messages, where known.
    """

    def __init__(self, messages, older_count=0, older_tokens=0, revision=None, tokens=None):
        super().__init__(messages)
        self.older_count = older_count
        self.older_tokens = older_tokens
        self.revision = revision
        self.tokens = tokens


@dataclass
class _Tail:
    """The newest live messages held in memory: current while ``revision`` is the counter's."""

    revision: int
    counted_for: str
    messages: list
    tokens: int
    complete: bool  # holds the whole live history
    wanted: int  # the most tokens a caller asked for; what is kept beyond twice that goes
    private: int = 0  # how many of the messages are kept for a private audience


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

    def _claim_position(self, tokens, step):
        """Add one message of ``tokens`` to the counter, raising its revision by ``step``.

        The counter is written before it is read (in the same statement where the database
        returns updated rows), so concurrent appends queue on the write lock instead of
        failing on a read-then-write upgrade. Raw SQL on this hot path: the ORM's query
        building costs ten times the query itself (see docs/benchmarks.md).

        Returns:
            tuple or None: The message's position and the new revision, or None when the
            counter is missing or was counted for another model.
        """
        update = (
            f"UPDATE {_COUNTER_TABLE} SET live_tokens = live_tokens + %s, "
            "live_count = live_count + 1, next_position = next_position + 1, "
            "revision = revision + %s WHERE db_script_id = %s AND counted_for = %s"
        )
        params = [tokens, step, self.script.id, self.counted_for]
        with connection.cursor() as cursor:
            if _updates_return_rows():
                cursor.execute(f"{update} RETURNING next_position, revision", params)
                claimed = cursor.fetchone()
            else:
                cursor.execute(update, params)
                if cursor.rowcount == 0:
                    return None
                cursor.execute(
                    f"SELECT next_position, revision FROM {_COUNTER_TABLE} "
                    "WHERE db_script_id = %s",
                    [self.script.id],
                )
                claimed = cursor.fetchone()
        if claimed is None:
            return None
        next_position, revision = claimed
        return next_position - 1, revision

    def append(self, message):
        """Validate and store one message at the end of the live history.

        Args:
            message (dict): A ``{role, content, ...}`` message; ``pinned`` True stores it
                pinned (see :meth:`set_pinned`).

        Returns:
            dict: The stored message, with its ``id`` and ``token_count``.

        Raises:
            MessageValidationError: if the message is malformed; nothing is stored.
        """
        validate_message(message)
        tokens = count_message_tokens(message, self.model)
        step = _revision_step()
        # Inside a caller's transaction, no savepoint of its own: a failed write fails the
        # caller's whole unit (an answer and its calls' results are stored together).
        with transaction.atomic(savepoint=False):
            claimed = self._claim_position(tokens, step)
            if claimed is None:
                self._counter()
                claimed = self._claim_position(tokens, step)
            position, revision = claimed
            values = {
                "position": position,
                **_row_fields(message),
                "token_count": tokens,
                "pinned": bool(message.get("pinned")),
            }
            # Raw SQL, as for the counter: the ORM's INSERT costs twice this one.
            row_id = insert_row(ConversationMessage, {"db_script_id": self.script.id, **values})
        stored = _columns_to_message([row_id, *map(values.get, _COLUMNS[1:])], stored=False)
        self._extend_tail(stored, revision - step, revision)
        return stored

    def _extend_tail(self, message, before, revision):
        """Add an appended message to the held tail, if the tail was current before it."""
        tail = self._current_tail(before)
        if tail is None:
            self.script.ndb.live_tail = None
            return
        tail.messages.append(message)
        tail.tokens += message["token_count"]
        tail.private += bool(message_audience(message))
        tail.revision = revision
        if tail.tokens > 2 * tail.wanted:
            _trim(tail)

    def recent(self, tokens, listeners=None):
        """Return the newest live messages ``listeners`` may hear: enough to fill ``tokens``.

        As many as a prompt of ``tokens`` could send, oldest first, or all of them when
        history is shorter; nothing older is read. Held in memory between calls and
        checked against the counter in one indexed read.

        Args:
            tokens (int): Tokens of heard messages wanted (a prompt's budget).
            listeners (list or None): Who will hear (see ``ai.audience``); ``None`` is
                the room, which hears only what is public.

        Returns:
            RecentHistory: The messages, with the count and tokens of those before them.
        """
        revision, live_tokens, live_count = self._state()
        tail = self._current_tail(revision)
        wanted = max(tokens, tail.wanted if tail else 0)
        while True:
            if tail is None or not (tail.complete or tail.tokens >= tokens):
                tail = self._load_tail(wanted, revision, live_tokens, live_count)
            heard, start, held, spanned = _heard_suffix(tail, tokens, listeners)
            if held >= tokens or tail.complete:
                break
            wanted, tail = 2 * wanted, None  # private messages hid some: read further back
        self.script.ndb.live_tail = tail
        older_count = live_count - len(tail.messages) + start
        return RecentHistory(heard, older_count, live_tokens - spanned, tokens=held)

    def newest_outline(self, tokens, count):
        """Return the newest live messages without their content: at least enough to
        outnumber ``count``, hold more than ``tokens`` tokens and begin with a message that
        is not a tool result; or all of them.

        Enough to find where a compaction splits the history (``ai.sleep.compaction``)
        without reading what it preserves. The tail held in memory serves when it is
        current and holds them.

        Args:
            tokens (int or float): Tokens the messages must exceed together.
            count (int): Messages they must outnumber.

        Returns:
            RecentHistory: ``{id, position, role, token_count}`` dicts (the whole messages
            when held), with ``tool_calls`` and ``tool_call_id`` where the message has them,
            oldest first; with the revision they were read at and the count and tokens of
            the messages before them.
        """
        revision, live_tokens, live_count = self._state()
        held = self._held_outline(tokens, count, revision, live_tokens, live_count)
        if held is not None:
            return held
        limit = _rows_holding(tokens, live_tokens, live_count) + count
        while True:
            with connection.cursor() as cursor:
                cursor.execute(
                    f"{_SELECT_OUTLINE} AND is_live ORDER BY position DESC, id DESC LIMIT %s",
                    [self.script.id, limit],
                )
                rows = cursor.fetchall()
            outline = [_columns_to_outline(columns) for columns in reversed(rows)]
            held = sum(entry["token_count"] for entry in outline)
            if len(rows) < limit or (
                held > tokens and len(outline) > count and outline[0]["role"] != "tool"
            ):
                return RecentHistory(
                    outline, live_count - len(outline), live_tokens - held, revision
                )
            limit *= 2

    def _held_outline(self, tokens, count, revision, live_tokens, live_count):
        """Return :meth:`newest_outline`'s messages from the tail held in memory, or None
        when it is not current or does not hold them."""
        tail = self._current_tail(revision)
        messages, held = (tail.messages if tail else []), 0
        for start in range(len(messages) - 1, -1, -1):
            held += messages[start]["token_count"]
            if (
                held > tokens
                and len(messages) - start > count
                and messages[start]["role"] != "tool"
            ):
                outline = messages[start:]
                return RecentHistory(
                    outline, live_count - len(outline), live_tokens - held, revision
                )
        return None

    def _current_tail(self, revision):
        """Return the tail held in memory if it is current at ``revision``, else None."""
        tail = self.script.ndb.live_tail
        if tail is not None and (tail.revision, tail.counted_for) == (revision, self.counted_for):
            return tail
        return None

    def _load_tail(self, wanted, revision, live_tokens, live_count):
        """Read the newest live messages holding at least ``wanted`` tokens, newest pages first."""
        page = _rows_holding(wanted, live_tokens, live_count)
        pages, tokens, before = [], 0, None
        while tokens < wanted:
            batch = self._page(before, page)
            pages.append(batch)
            tokens += sum(message["token_count"] for message in batch)
            if len(batch) < page:
                break
            before = batch[0]["position"]
        return self._tail_of(pages, revision, live_count, wanted)

    def warm(self, tokens):
        """Hold the newest live messages a prompt of ``tokens`` may send, read a page of
        ``WARM_PAGE`` at a time, each with the part of it that is sent.

        Read at once, a long history holds the reactor (2,000 messages: about 20 ms of a
        first tick), and a server's first ticks after a start all read theirs: the pages of
        all the assistants warming take turns, a few ms of a reactor turn at most
        (``ai.utils.reactor_turns``; when each read one page every turn, 200 assistants
        after a start held the reactor for 0.4-1 s a turn). A tail held already (current or
        not), or a history written to meanwhile, is left to :meth:`recent`, which reads what
        it needs then.

        Returns:
            Deferred: Fires with None once the tail is held (or left).
        """
        if self.script.ndb.live_tail is not None:
            return defer.succeed(None)  # held: ``recent`` checks it is current
        return in_turns(self._warm_pages(tokens)).addCallback(lambda _: None)

    def _warm_pages(self, tokens):
        """Read the pages of :meth:`warm`, yielding after each."""
        revision, _, live_count = self._state()
        pages, held, before = [], 0, None
        while held < tokens:
            batch = self._page(before, WARM_PAGE)
            for message in batch:
                message.sendable_part()
            pages.append(batch)
            held += sum(message["token_count"] for message in batch)
            if len(batch) < WARM_PAGE:
                break
            before = batch[0]["position"]
            yield
        if self._state()[0] == revision:
            self.script.ndb.live_tail = self._tail_of(pages, revision, live_count, tokens)

    def _page(self, before, size):
        """Return up to ``size`` of the newest live messages before ``position`` (None: the
        newest of all), oldest first."""
        condition, params = _live_before(before)
        with connection.cursor() as cursor:
            cursor.execute(
                f"{_SELECT_MESSAGES} AND {condition} ORDER BY position DESC, id DESC LIMIT %s",
                [self.script.id, *params, size],
            )
            rows = cursor.fetchall()
        return [_columns_to_message(columns) for columns in reversed(rows)]

    def _tail_of(self, pages, revision, live_count, wanted):
        """Return the tail of ``pages`` (newest first) read at ``revision``."""
        messages = [message for batch in reversed(pages) for message in batch]
        tokens = sum(message["token_count"] for message in messages)
        private = sum(1 for message in messages if message_audience(message))
        complete = len(messages) == live_count
        tail = _Tail(revision, self.counted_for, messages, tokens, complete, wanted, private)
        _drop_leading_results(tail)
        return tail

    def _state(self):
        """Return the counter's ``(revision, live_tokens, live_count)`` in one indexed read."""
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT revision, live_tokens, live_count FROM {_COUNTER_TABLE} "
                "WHERE db_script_id = %s AND counted_for = %s",
                [self.script.id, self.counted_for],
            )
            row = cursor.fetchone()
        if row is None:
            counter = self._counter()
            return counter.revision, counter.live_tokens, counter.live_count
        return row

    def _read(self, condition, params, limit=None):
        """Return the messages of this script matching the SQL ``condition``, oldest first
        (the first ``limit`` of them, if given).

        Raw SQL: at thousands of messages, the ORM's per-row conversion costs more than the
        query itself (see docs/benchmarks.md).
        """
        tail = "" if limit is None else f" LIMIT {int(limit)}"
        with connection.cursor() as cursor:
            cursor.execute(
                f"{_SELECT_MESSAGES} AND {condition} ORDER BY position, id{tail}",
                [self.script.id, *params],
            )
            return [_columns_to_message(columns) for columns in cursor.fetchall()]

    def replace_with_summaries(self, compacted, summaries, read_at=None, record=None):
        """Archive ``compacted`` and put summaries live in their place, atomically.

        Messages appended meanwhile are untouched: only the unpinned rows between the first
        and last position of ``compacted`` change. The summaries take the positions of the first
        messages they replace, in order, and each replaced row links to the summary that
        stands for it: the range is archived in one UPDATE linked to the summary of most of
        it, then the rows of any other summary are linked to theirs.

        Args:
            compacted (list): A run of consecutive live unpinned messages read from this
                store (with ``id``, ``position`` and ``token_count``), oldest first; pinned
                messages between them stay live where they are.
            summaries (list): ``(summary message, the messages of compacted it replaces)``
                pairs, which together cover ``compacted``.
            read_at (int, optional): The counter's revision when ``compacted`` was read as
                all the live unpinned messages from its first position to its last: if it
                is still the counter's, nothing was written since and they are not read
                again.
            record (CompactionRecord, optional): The compaction the summaries belong to.

        Returns:
            list: The stored summary messages.

        Raises:
            HistoryChanged: if ``compacted`` is no longer exactly the live messages between
                its first and last position; nothing changes.
        """
        for message, _ in summaries:
            validate_message(message)
        first, last = compacted[0]["position"], compacted[-1]["position"]
        # Kept: the compaction counted each summary (its ``summary_token_count``) already.
        counted = [kept_message_tokens(message, self.model) for message, _ in summaries]
        step = _revision_step()
        with transaction.atomic():
            # Written first: writers elsewhere queue behind this transaction.
            revision = self._raise_revision(step)
            if read_at is not None and revision == read_at + step:
                removed = sum(message["token_count"] for message in compacted)
            else:
                live = self._lock_live_range(first, last)
                if set(live) != {message["id"] for message in compacted}:
                    raise HistoryChanged("the messages to compact are no longer the live ones")
                # The stored counts, not those read before the summary call: a model change
                # meanwhile recounted them for the counter's new tokenizer.
                removed = sum(live.values())
            stored = [
                ConversationMessage.objects.create(
                    db_script_id=self.script.id,
                    position=first + offset,
                    role=message["role"],
                    content=message.get("content"),
                    metadata=message.get("metadata") or {},
                    token_count=tokens,
                    made_by=record,
                )
                for offset, ((message, _), tokens) in enumerate(zip(summaries, counted))
            ]
            linked = sorted(zip(stored, summaries), key=lambda pair: -len(pair[1][1]))
            self._archive_range(first, last, stored, linked[0][0].id)
            for summary, (_, replaced) in linked[1:]:  # another audience's messages
                ConversationMessage.objects.filter(pk__in=[m["id"] for m in replaced]).update(
                    replaced_by=summary
                )
            HistoryCounter.objects.filter(db_script_id=self.script.id).update(
                live_tokens=F("live_tokens") - removed + sum(counted),
                live_count=F("live_count") - len(compacted) + len(stored),
            )
        self.script.ndb.live_tail = None
        return [row_to_message(summary) for summary in stored]

    def _raise_revision(self, step):
        """Raise the counter's revision by ``step``; return the new one (None: no counter)."""
        with connection.cursor() as cursor:
            cursor.execute(
                f"UPDATE {_COUNTER_TABLE} SET revision = revision + %s WHERE db_script_id = %s",
                [step, self.script.id],
            )
            cursor.execute(
                f"SELECT revision FROM {_COUNTER_TABLE} WHERE db_script_id = %s",
                [self.script.id],
            )
            row = cursor.fetchone()
        return row and row[0]

    def _lock_live_range(self, first, last):
        """Return ``{id: token_count}`` of the live unpinned rows from position ``first`` to
        ``last``, locked until the transaction ends where the database can lock rows."""
        lock = " FOR UPDATE" if connection.features.has_select_for_update else ""
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT id, token_count FROM {_MESSAGE_TABLE} WHERE db_script_id = %s "
                "AND is_live AND pinned = %s AND position >= %s AND position <= %s"
                f"{lock}",
                [self.script.id, False, first, last],
            )
            return dict(cursor.fetchall())

    def _archive_range(self, first, last, summaries, replaced_by):
        """Archive the live unpinned rows from position ``first`` to ``last`` but
        ``summaries``, linking them to the summary ``replaced_by``: one UPDATE, whatever
        their number."""
        keep = ", ".join(["%s"] * len(summaries))
        with connection.cursor() as cursor:
            cursor.execute(
                f"UPDATE {_MESSAGE_TABLE} SET is_live = %s, replaced_by_id = %s "
                "WHERE db_script_id = %s AND is_live AND pinned = %s AND position >= %s "
                f"AND position <= %s AND id NOT IN ({keep})",
                [False, replaced_by, self.script.id, False, first, last]
                + [summary.id for summary in summaries],
            )

    def replace_each(self, replacements, record=None):
        """Put each new message live in place of the messages it stands for, atomically.

        For replacements scattered through the history (a masked tool output, a summarized
        run of assistant messages): each new message takes the position of the first
        message it replaces, and those are archived, linked to it.

        Args:
            replacements (list): ``(new message, the live unpinned messages it replaces)``
                pairs; the replaced messages have ``id``, ``position`` and ``token_count``.
            record (CompactionRecord, optional): The compaction the new messages belong to.

        Returns:
            list: The stored new messages.

        Raises:
            HistoryChanged: if a message to replace is no longer live, or was pinned;
                nothing changes.
        """
        for message, _ in replacements:
            validate_message(message)
        counted = [count_message_tokens(message, self.model) for message, _ in replacements]
        ids = [old["id"] for _, replaced in replacements for old in replaced]
        with transaction.atomic():
            self._raise_revision(_revision_step())
            live = self._lock_live_ids(ids)
            if len(live) != len(set(ids)):
                raise HistoryChanged("the messages to replace are no longer the live ones")
            stored = []
            for (message, replaced), tokens in zip(replacements, counted):
                row = ConversationMessage.objects.create(
                    db_script_id=self.script.id,
                    position=replaced[0]["position"],
                    **_row_fields(message),
                    token_count=tokens,
                    made_by=record,
                )
                ConversationMessage.objects.filter(pk__in=[old["id"] for old in replaced]).update(
                    is_live=False, replaced_by=row
                )
                stored.append(row)
            HistoryCounter.objects.filter(db_script_id=self.script.id).update(
                live_tokens=F("live_tokens") - sum(live.values()) + sum(counted),
                live_count=F("live_count") - len(live) + len(stored),
            )
        self.script.ndb.live_tail = None
        return [row_to_message(row) for row in stored]

    def _lock_live_ids(self, ids):
        """Return ``{id: token_count}`` of the live unpinned rows among ``ids``, locked until
        the transaction ends where the database can lock rows."""
        lock = " FOR UPDATE" if connection.features.has_select_for_update else ""
        found = {}
        with connection.cursor() as cursor:
            for start in range(0, len(ids), _IDS_PER_QUERY):
                chunk = ids[start : start + _IDS_PER_QUERY]
                cursor.execute(
                    f"SELECT id, token_count FROM {_MESSAGE_TABLE} WHERE db_script_id = %s "
                    f"AND is_live AND pinned = %s AND id IN ({', '.join(['%s'] * len(chunk))})"
                    f"{lock}",
                    [self.script.id, False, *chunk],
                )
                found.update(cursor.fetchall())
        return found

    def undo(self, record):
        """Put back live what the compaction ``record`` replaced and delete what it wrote,
        atomically; mark the record undone.

        The restored messages keep their positions; their token counts are made again when
        the model's tokenizer changed since the compaction.

        Returns:
            int: How many messages came back.

        Raises:
            HistoryChanged: if something the compaction wrote is no longer live (a later
                compaction replaced it), or it was undone already; nothing changes.
        """
        with transaction.atomic():
            self._raise_revision(_revision_step())
            made = dict(
                ConversationMessage.objects.filter(made_by=record).values_list("id", "is_live")
            )
            if record.undone_at or not made:
                raise HistoryChanged("this compaction was undone already")
            if not all(made.values()):
                raise HistoryChanged(
                    "a later compaction replaced what this one wrote: undo that one first"
                )
            replaced = ConversationMessage.objects.filter(replaced_by_id__in=list(made))
            rows = list(replaced)
            if record.result.get("counted_for") != self.counted_for:
                for row in rows:
                    row.token_count = count_message_tokens(row_to_message(row), self.model)
                ConversationMessage.objects.bulk_update(rows, ["token_count"])
            written = ConversationMessage.objects.filter(pk__in=list(made))
            written_tokens = sum(written.values_list("token_count", flat=True))
            replaced.update(is_live=True, replaced_by=None)
            written.delete()
            HistoryCounter.objects.filter(db_script_id=self.script.id).update(
                live_tokens=F("live_tokens")
                - written_tokens
                + sum(row.token_count for row in rows),
                live_count=F("live_count") - len(made) + len(rows),
            )
            record.undone_at = timezone.now()
            record.save(update_fields=["undone_at"])
        self.script.ndb.live_tail = None
        return len(rows)

    def set_pinned(self, message_ids, pinned=True):
        """Pin (or unpin) live messages with the rest of their tool-call units: a pinned
        message is never compacted or masked, and a call never loses its results.

        Returns:
            list: The ids of the live messages pinned (or unpinned), oldest first.
        """
        positions = self.live_rows().filter(pk__in=list(message_ids))
        units = {
            message_id
            for position in positions.values_list("position", flat=True)
            for message_id in self._unit_at(position)
        }
        with transaction.atomic():
            self._raise_revision(_revision_step())
            self.live_rows().filter(pk__in=units).update(pinned=pinned)
        self.script.ndb.live_tail = None
        return sorted(units)

    def _unit_at(self, position):
        """Return the ids of the live tool-call unit holding the message at ``position``
        (see ``prompt_assembly.history_units``): a call and its results, or one message."""
        around = []
        with connection.cursor() as cursor:
            for condition, order in (("<=", "DESC"), (">", "ASC")):
                cursor.execute(
                    f"{_SELECT_OUTLINE} AND is_live AND position {condition} %s "
                    f"ORDER BY position {order} LIMIT %s",
                    [self.script.id, position, _UNIT_SCAN],
                )
                rows = [_columns_to_outline(columns) for columns in cursor.fetchall()]
                around.append(rows[::-1] if order == "DESC" else rows)
        before, after = around
        window = before + after
        start = unit_start(window, len(before) - 1)
        return [message["id"] for message in history_units(window[start:])[0]]

    def pinned_messages(self):
        """Return the live pinned messages, oldest first."""
        return self._read("is_live AND pinned = %s", [True])

    def archive_under(self, stands_for, messages):
        """Keep ``messages`` archived from the start, linked to the live message that stands
        for them (a ``delegate`` call's result stands for its sub-agent's work).

        They never join the live history: the counter, the live tail and its revision stay
        as they are. Each is validated and counted like an appended message and takes the
        position of ``stands_for``, as the messages a summary replaced take the summary's.

        Args:
            stands_for (dict): A stored message, with its ``id`` and ``position``.
            messages (list): The messages to keep.

        Returns:
            list: The ids of the archived rows, in order.

        Raises:
            MessageValidationError: if one is malformed; nothing is stored.
        """
        for message in messages:
            validate_message(message)
        rows = [
            ConversationMessage(
                db_script_id=self.script.id,
                position=stands_for["position"],
                **_row_fields(message),
                token_count=count_message_tokens(message, self.model),
                is_live=False,
                replaced_by_id=stands_for["id"],
            )
            for message in messages
        ]
        with transaction.atomic():
            for row in rows:
                row.save()
        return [row.pk for row in rows]

    def archived_by(self, summary_id):
        """Return the messages that the summary ``summary_id`` replaced, oldest first."""
        return self._read("replaced_by_id = %s", [summary_id])

    def live_rows(self):
        """Return a queryset of the live rows, oldest first."""
        return ConversationMessage.objects.filter(db_script_id=self.script.id, is_live=True)

    def messages(self, before=None):
        """Return the live history as a list of message dicts, oldest first.

        Args:
            before (int, optional): Only the messages at positions before this one.
        """
        return self._read(*_live_before(before))

    def read_messages(self, before=None):
        """Return :meth:`messages` read off the reactor: in a thread of ``READS``, a page of
        ``READ_PAGE`` at a time, each page a statement of its own.

        Inside a transaction they are read at once, on its connection: another would not
        see what it wrote. Pages read outside one may straddle a write made meanwhile; a
        caller that must know checks the counter's revision afterwards (as
        :meth:`replace_with_summaries` does with ``read_at``).

        Returns:
            Deferred: Fires with the messages, oldest first.
        """
        if connection.in_atomic_block:
            return defer.succeed(self.messages(before))
        return READS.run(self._read_pages, before)

    def _read_pages(self, before):
        """Read :meth:`messages` page by page, then close this thread's connection (an open
        one would keep PostgreSQL from dropping a test database)."""
        try:
            messages, (condition, params) = [], _live_before(before)
            while True:
                after = messages[-1]["position"] if messages else None
                page = self._read(
                    condition if after is None else f"{condition} AND position > %s",
                    params if after is None else [*params, after],
                    READ_PAGE,
                )
                messages.extend(page)
                if len(page) < READ_PAGE:
                    return messages
        finally:
            connection.close()

    def totals(self):
        """Return ``(live_tokens, live_count)`` in one indexed read."""
        return self._state()[1:]

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
            counter.revision += _revision_step()
            counter.save()
        self.script.ndb.live_tail = None
        return counter

    def clear(self):
        """Delete the whole history of this script (live and archived)."""
        with transaction.atomic():
            ConversationMessage.objects.filter(db_script_id=self.script.id).delete()
            HistoryCounter.objects.filter(db_script_id=self.script.id).update(
                live_tokens=0, live_count=0, revision=F("revision") + _revision_step()
            )
        self.script.ndb.live_tail = None


def _live_before(position):
    """Return the SQL condition and parameters of the live rows before ``position`` (None:
    all the live rows)."""
    if position is None:
        return "is_live", []
    return "is_live AND position < %s", [position]


def _rows_holding(tokens, live_tokens, live_count):
    """Return how many of the newest rows to read for ``tokens``: the live history's
    average message size says, with a margin of 64 rows."""
    average = live_tokens / live_count if live_count else 1
    return int(tokens / max(average, 1)) + 64


def _heard_suffix(tail, tokens, listeners):
    """Return the newest of the tail's messages that ``listeners`` may hear until they hold
    ``tokens`` and begin a unit: those messages oldest first, the index where they begin,
    their tokens, and the tokens of all the tail's messages from that index (heard or not)."""
    messages = tail.messages
    if not tail.private and tail.tokens <= tokens:
        return list(messages), 0, tail.tokens, tail.tokens  # everyone hears all of it
    index, held = len(messages), 0
    if not tail.private:  # everyone hears each of them: they are only counted
        while index > 0 and held < tokens:
            index -= 1
            held += messages[index]["token_count"]
        # A unit is taken whole: on until the oldest taken is no tool result.
        while 0 < index < len(messages) and messages[index]["role"] == "tool":
            index -= 1
            held += messages[index]["token_count"]
        return messages[index:], index, held, held
    heard, spanned = [], 0
    # Past ``tokens`` until the oldest taken is no tool result: a unit is taken whole.
    while index > 0 and (held < tokens or (heard and heard[-1]["role"] == "tool")):
        index -= 1
        message = messages[index]
        spanned += message["token_count"]
        if may_hear(message_audience(message), listeners):
            heard.append(message)
            held += message["token_count"]
    heard.reverse()
    return heard, index, held, spanned


def _trim(tail):
    """Forget the oldest held messages beyond what the largest request needs, and more."""
    keep, held, drop = tail.wanted + tail.wanted // 4, tail.tokens, 0
    while drop < len(tail.messages) and held > keep:
        held -= tail.messages[drop]["token_count"]
        drop += 1
    _forget(tail, drop)
    tail.complete = tail.complete and drop == 0
    _drop_leading_results(tail)


def _drop_leading_results(tail):
    """Forget tool results at the start of a partial tail: their call is not held, and a
    result must never be sent without it."""
    if tail.complete:
        return
    drop = 0
    while drop < len(tail.messages) and tail.messages[drop]["role"] == "tool":
        drop += 1
    _forget(tail, drop)


def _forget(tail, count):
    """Drop the tail's ``count`` oldest messages."""
    gone = tail.messages[:count]
    tail.tokens -= sum(message["token_count"] for message in gone)
    tail.private -= sum(1 for message in gone if message_audience(message))
    del tail.messages[:count]
