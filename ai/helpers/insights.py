"""Insights: the journal entries a reflection writes, and the entries waiting for one.

An insight is a journal entry of source ``reflection`` that cites the entries it came from
(``JournalEntry.cites``). It may cite only real entries of its assistant that the
reflection was shown, must say something that none of the entries shown says alone, and
is kept for the narrowest audience of what it cites and of the reflection that wrote it
(``ai.audience.narrowest``): reflecting on a whisper never makes it public.

Every other entry waits for a reflection (``JournalEntry.reflected`` False) until one
covers it; ``pending_importance`` adds up what waits, for the trigger in ``ai.reflection``.
"""

from collections import namedtuple

from django.db import connection

from ..audience import narrowest
from ..models import JournalEntry
from ..utils.echo import is_echo
from ..utils.facts import plain_words, telling_words
from ..utils.raw_rows import select_rows
from ..utils.sentences import stated_lines
from ..utils.text_tool_calls import looks_like_markup
from .idle_checks import PENDING_IMPORTANCE, forget, remembered
from .journal import INSIGHT_SOURCE, add_entry, digest, find_same

# The shortest word that shows an insight draws on what it cites.
GROUNDING_LETTERS = 4
# An insight given no citation cites the entries it was shown that share at least this
# many such words with it, the most sharing first, at most ``INFERRED_CITES`` of them
# (Qwen2.5-Coder-1.5B wrote insights without cites, and with the ids among its tags).
INFERRED_MIN_SHARED = 2
INFERRED_CITES = 3
# A line of a reflection's text answer shorter than this is no insight ("Done.").
STATED_MIN_WORDS = 5
# What a reflection reads of the entries waiting for it, and of the entries it was shown
# (plain SQL: the ORM's query and model rows cost a reflecting tick about a third of its
# reactor time at a long unreflected journal; see docs/benchmarks.md).
PendingEntry = namedtuple(
    "PendingEntry", ["id", "db_object_id", "entry_id", "content", "importance", "score", "audience"]
)
ShownEntry = namedtuple("ShownEntry", ["entry_id", "content", "normalized", "audience"])
# Written as the ORM writes ``reflected=False``, so that ``ai_entry_unreflected_idx`` serves
# it.
_UNREFLECTED = "db_object_id = %s AND NOT reflected"


def pending_entries(character, limit):
    """Return up to ``limit`` entries no reflection has covered yet, oldest first, as
    :data:`PendingEntry` tuples."""
    rows = select_rows(
        JournalEntry,
        PendingEntry._fields,
        _UNREFLECTED,
        [character.id],
        f"ORDER BY id LIMIT {limit:d}",
    )
    return [PendingEntry(*row) for row in rows]


def pending_importance(character):
    """Return the summed importance of the entries no reflection has covered yet.

    An entry's importance is its score (0-10, see ``ai.importance_scoring``), or the
    writer's importance for an entry scored before scores existed. One indexed query,
    whose answer is kept until the journal is written (see ``idle_checks``).
    """

    def ask():
        table = connection.ops.quote_name(JournalEntry._meta.db_table)
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT SUM(COALESCE(score, importance)) FROM {table} WHERE {_UNREFLECTED}",
                [character.id],
            )
            return float(cursor.fetchone()[0] or 0)

    return remembered(character, PENDING_IMPORTANCE, ask)


def latest_entry_id(character):
    """Return the row id of the journal's newest entry (0 when it is empty)."""
    rows = select_rows(
        JournalEntry, ["id"], "db_object_id = %s", [character.id], "ORDER BY id DESC LIMIT 1"
    )
    return rows[0][0] if rows else 0


def insights_after(character, row_id):
    """Return the ids (``entry_id``) of the insights written after the entry of row id
    ``row_id``, oldest first."""
    rows = select_rows(
        JournalEntry,
        ["entry_id"],
        "db_object_id = %s AND id > %s AND source_type = %s",
        [character.id, row_id, INSIGHT_SOURCE],
        "ORDER BY id",
    )
    return [entry_id for (entry_id,) in rows]


def _grounding_words(text):
    """Return the words of ``text``, other than filler, of ``GROUNDING_LETTERS`` letters on."""
    return {w for w in telling_words(plain_words(text)) if len(w) >= GROUNDING_LETTERS}


def _draws_on(content, cited):
    """Tell whether ``content`` shares a grounding word with one of the ``cited`` texts
    (Qwen2.5-Coder-1.5B wrote "This entry wraps up my reflection on my recent work." as an
    insight)."""
    words = _grounding_words(content)
    return any(words & set(telling_words(plain_words(text))) for text in cited)


def _sharing_entries(content, shown):
    """Return the ids of the ``shown`` entries (rows) an insight of ``content`` cites when it
    was given none: those sharing ``INFERRED_MIN_SHARED`` grounding words with it or more."""
    words = _grounding_words(content)
    scored = [(len(words & _grounding_words(row.content)), row.entry_id) for row in shown]
    ranked = sorted((s for s in scored if s[0] >= INFERRED_MIN_SHARED), key=lambda s: -s[0])
    return [entry_id for _, entry_id in ranked[:INFERRED_CITES]]


def mark_reflected(rows):
    """Mark journal ``rows`` as covered by a reflection."""
    JournalEntry.objects.filter(id__in=[row.id for row in rows]).update(reflected=True)
    for object_id in {row.db_object_id for row in rows}:
        forget(object_id, PENDING_IMPORTANCE)


def write_insight(character, content, cites, offered, audience, importance=5, tags=()):
    """Write an insight citing ``cites``, or refuse it.

    Args:
        character (AssistantCharacter): Whose journal.
        content (str): The insight.
        cites (list): The ids of the entries it came from, as the model gave them.
        offered (iterable): The entry ids the reflection was shown; only those may be cited.
        audience (list or None): The reflection's audience (what it was shown).
        importance (int): 1 to 10.
        tags (iterable): Short labels.

    Returns:
        tuple: ``(entry, ignored, inferred)``: the entry written, the cited ids left out
        (not shown in this reflection, or no entry of this journal), and whether its
        citations were inferred (none given: see ``_sharing_entries``).

    Raises:
        ValueError: saying why, for the model: no real citation, a copy of a cited entry,
            entries kept for different listeners, or what ``add_entry`` refuses.
    """
    rows = {row.entry_id: row for row in shown_entries(character, offered)}
    wanted = list(dict.fromkeys(str(entry_id) for entry_id in cites or ()))
    inferred = not wanted
    if inferred:
        wanted = _sharing_entries(content, rows.values())
    cited = [rows[entry_id] for entry_id in wanted if entry_id in rows]
    ignored = [entry_id for entry_id in wanted if entry_id not in rows]
    if not cited:
        raise ValueError(
            "an insight cites, in cites, the ids of the journal entries it comes from, "
            "as listed in this reflection"
            + (f" (not among them: {', '.join(ignored)})" if ignored else "")
            + (" (none given, and no entry shown shares two words with it)" if inferred else "")
        )
    # Any entry shown, cited or not (the cited first): Qwen2.5-Coder-1.5B journaled the
    # listed entries again as "insights", each citing one other entry.
    uncited = [row for row in rows.values() if row not in cited]
    normalized = digest(content)
    copied = next(
        (
            row
            for row in [*cited, *uncited]
            if row.normalized == normalized or is_echo(content, row.content)
        ),
        None,
    )
    if copied:
        raise ValueError(
            f"it repeats entry {copied.entry_id}; an insight says what the entries mean "
            "together, in your own words"
        )
    if not _draws_on(content, [row.content for row in cited]):
        raise ValueError(
            "it names nothing of the entries it cites; an insight says what they mean "
            "together (who, what, where)"
        )
    try:
        kept_for = narrowest([audience, *(row.audience for row in cited)])
    except ValueError as err:
        raise ValueError(f"the entries it cites cannot make one insight: {err}") from err
    entry = add_entry(
        character,
        content,
        source_type=INSIGHT_SOURCE,
        importance=importance,
        tags=tags,
        audience=kept_for,
        cites=[row.entry_id for row in cited],
    )
    return entry, ignored, inferred


def shown_entries(character, entry_ids):
    """Return the character's entries of the ids ``entry_ids`` (``entry_id``), oldest first,
    as :data:`ShownEntry` tuples."""
    entry_ids = list(dict.fromkeys(entry_ids))
    if not entry_ids:
        return []
    marks = ", ".join(["%s"] * len(entry_ids))
    # Ordered here: for ``ORDER BY id`` SQLite read every entry of the journal, in id order
    # by the owner index, instead of looking the few ids up by the unique index.
    rows = select_rows(
        JournalEntry,
        ["id", *ShownEntry._fields],
        f"db_object_id = %s AND entry_id IN ({marks})",
        [character.id, *entry_ids],
    )
    return [ShownEntry(*row[1:]) for row in sorted(rows)]


def write_stated_insights(character, texts, offered, audience):
    """Write the insights a reflection stated as text instead of calling
    ``add_journal_entry``, and return the entries written.

    Generative Agents read their reflections' insights from text; Qwen2.5-Coder-1.5B, asked
    for calls, often wrote them as prose ("These entries together suggest a pattern in
    <name>'s ..."). Each line of a text answer (list marks removed; no question, no line of
    fewer than ``STATED_MIN_WORDS`` words, no call or code the parser could not read) is an
    insight citing the shown entries it names
    by id, else those it shares words with, and passes the checks of
    :func:`write_insight`; a line they refuse, or one journaled already, is left out.
    """
    written = []
    for text in texts:
        for line in stated_lines(text, STATED_MIN_WORDS):
            if looks_like_markup(line) or find_same(character, line, audience):
                continue
            cites = [entry_id for entry_id in offered if entry_id in line]
            try:
                entry, _, _ = write_insight(character, line, cites, offered, audience)
            except ValueError:
                continue
            written.append(entry)
    return written
