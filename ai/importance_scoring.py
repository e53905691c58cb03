"""Importance scores of journal entries, 0 to 10: a cheap heuristic, and the model's opinion.

Every entry gets :func:`heuristic_importance` when it is written. While the assistant
sleeps, :func:`score_entries_with_model` may ask the model to rate the newest entries it
has not rated yet; an entry's score becomes the mean of both. The episodic prune (see
``helpers.episodic_index``) moves entries scored low out of the active journal.
"""

import re

from evennia.utils import logger
from twisted.internet import defer

from .helpers.idle_checks import PENDING_IMPORTANCE, forget
from .llm_interaction import call_llm
from .models import JournalEntry
from .utils.markers import SCORING_HEADER
from .utils.message_format import quoted

# What makes a fact last, and how much each raises the writer's importance.
_LASTING = (
    (re.compile(r"\b(password|passphrase|secret|code|combination|pin|key)s?\b"), 2.0),
    (re.compile(r"\b(promise[sd]?|owes?|owed|debts?|deal|agreed?|deadline|must|swore)\b"), 1.5),
    (re.compile(r"\d"), 1.0),
    (
        re.compile(
            r"\b(north|south|east|west|beneath|under|behind|inside|buried|hidden|lives|located"
            r"|near|upstairs|downstairs)\b"
        ),
        1.0,
    ),
    (re.compile(r"\b(always|never)\b"), 1.0),
)
NAME_BONUS = 1.0
MAX_BONUS = 4.0
# Small talk, and how much each kind lowers an entry that holds no lasting fact.
_SMALL_TALK = (
    (
        re.compile(r"\b(hello|hi|hey|greet\w*|good (morning|evening|night)|(good)?bye|farewell)\b"),
        2.0,
    ),
    (re.compile(r"\b(thanks?|thank you|cheers|welcome)\b"), 2.0),
    (re.compile(r"\b(weather|rain\w*|sunny|cloudy|windy)\b"), 1.5),
)
# An entry with fewer content words (three letters on) than this says little.
MIN_WORDS = 4
VAGUE_PENALTY = 1.5
# A compaction's synthesis condenses many facts.
SOURCE_BONUS = {"compaction": 1.0}
_TOKEN = re.compile(r"[A-Za-z][\w']*|[.!?:;]")
_GREETING_WORDS = {"hello", "hi", "hey", "greetings", "thanks", "thank", "bye", "farewell"}

SCORING_PROMPT = """Rate how important each journal entry below is for you to remember in \
the long run, from 1 (small talk, trivia) to 10 (vital: secrets, passwords, promises, \
debts, names, places). Answer with one JSON object mapping each entry's id to its score, \
such as {"journal_20250101_120000": 7}, and nothing else."""
# An id (quoted) and a number after it: read inside fences, prose or a nested object alike.
_SCORE_PAIR = re.compile(r'"([^"\s]+)"\s*:\s*"?(\d+(?:\.\d+)?)')


def has_name(text):
    """Tell whether ``text`` names someone or something: a capital mid-sentence.

    A capital after a greeting ("Hello Helper") addresses the listener and names nothing.
    """
    previous = "."
    for token in _TOKEN.findall(text):
        named = token[0].isupper() and len(token) > 1 and not token.startswith("I'")
        if named and previous not in ".!?:;" and previous.lower() not in _GREETING_WORDS:
            return True
        previous = token
    return False


def heuristic_importance(content, source_type, importance=5, tags=()):
    """Return how much an entry matters, 0-10, from its text alone (no database, no model).

    Starts from the writer's ``importance`` (1-10); concrete, lasting facts (secrets,
    commitments, numbers, places, names, "always"/"never") raise it, and an entry without
    any reads as small talk: greetings, thanks, weather and short vague lines lower it.
    """
    text = " ".join([content or "", *map(str, tags)])
    lower = text.lower()
    bonus = sum(weight for pattern, weight in _LASTING if pattern.search(lower))
    bonus += NAME_BONUS * has_name(content or "")
    if bonus:
        score = importance + min(bonus, MAX_BONUS)
    else:
        score = importance - sum(weight for pattern, weight in _SMALL_TALK if pattern.search(lower))
        score -= VAGUE_PENALTY * (len(re.findall(r"\w{3,}", content or "")) < MIN_WORDS)
    score += SOURCE_BONUS.get(source_type, 0.0)
    return round(min(10.0, max(0.0, score)), 1)


def parse_scores(text, wanted):
    """Return ``{entry id: score}`` read from a model's answer, for ids in ``wanted`` only.

    Fences and prose around the JSON are ignored, and so is a score outside 1-10.
    """
    scores = {}
    for entry_id, value in _SCORE_PAIR.findall(text or ""):
        if entry_id in wanted and 1 <= float(value) <= 10:
            scores[entry_id] = float(value)
    return scores


def scoring_messages(rows):
    """Return the scoring call's messages: the instructions, then one entry a line."""
    listed = "\n".join(f"- {row.entry_id}: {quoted(row.content)}" for row in rows)
    return [
        {"role": "system", "content": SCORING_PROMPT},
        {"role": "user", "content": f"{SCORING_HEADER}\n{listed}"},
    ]


@defer.inlineCallbacks
def score_entries_with_model(script, character, limit):
    """Let the model rate up to ``limit`` of the newest entries it has not rated yet.

    Each rated entry's score becomes the mean of its heuristic score and the model's, and
    it is marked ``model_scored`` so it is not rated again. One model call; a failed call
    or an unreadable answer changes nothing.

    Returns:
        Deferred: Fires with ``{"scored": n, "entry_ids": [...]}``; ``{"skipped": True,
        "reason": ...}`` when off or nothing is left to rate; ``{"scored": 0, "error": ...}``
        on failure.
    """
    if not script.get_config("importance_model_scoring"):
        return {"skipped": True, "reason": "importance_model_scoring is off"}
    pending = JournalEntry.objects.filter(
        db_object_id=character.id, model_scored=False, archived=False
    )
    rows = list(pending.order_by("-id")[:limit])
    if not rows:
        return {"skipped": True, "reason": "no entry left to score"}
    answer = yield call_llm(script, scoring_messages(rows), purpose="task")
    if not answer.ok:
        return {"scored": 0, "error": f"{answer.error_kind}: {answer.error}"}
    scores = parse_scores(answer.content, {row.entry_id for row in rows})
    if not scores:
        logger.log_warn(f"AI {script.label}: no readable score in {answer.content[:200]!r}")
        return {"scored": 0, "error": "the answer held no readable score"}
    rated = [row for row in rows if row.entry_id in scores]
    for row in rated:
        heuristic = heuristic_importance(row.content, row.source_type, row.importance, row.tags)
        row.score = round((heuristic + scores[row.entry_id]) / 2, 1)
        row.model_scored = True
    JournalEntry.objects.bulk_update(rated, ["score", "model_scored"])
    forget(character.id, PENDING_IMPORTANCE)
    return {"scored": len(rated), "entry_ids": [row.entry_id for row in rated]}
