"""The ``search_history`` tool: the assistant searches its own archived past (MemGPT's
"search your own history").

Compaction archives what it replaces (a masked tool output's original, the messages a
summary stands for) instead of deleting it; this tool finds those messages by their words
and reads one back whole. What sub-agents said is archived too, for builders alone: no
search finds it. It shows only what the turn's audience may hear
(``ai.audience``): a whisper stays with its whisperer.
"""

from django.db.models import Q

from ..audience import may_hear, message_audience
from ..helpers.journal import shared_words
from ..history import row_to_message
from ..models import ConversationMessage
from ..utils.markers import SUB_AGENT_KEY
from ..utils.message_format import tool_call_text
from .base import LIMIT_PARAMETER, Tool, ToolResult
from .registry import register_tool

# The newest archived messages a search reads at most, whatever the archive's size.
SCAN_ROWS = 5000
# Matching messages scored at most, newest first.
CANDIDATES = 200
# Words of a query a search looks for at most (the longest: they tell the most).
QUERY_WORDS = 6
SNIPPET_CHARS = 300
# What one archived message read back whole shows at most.
MAX_MESSAGE_CHARS = 4000


def search_history(ctx, query=None, message_id=None, limit=5):
    """Find archived messages sharing words with ``query``, or read message ``message_id``."""
    if message_id is not None:
        return read_archived(ctx, message_id)
    if not (query and query.strip()):
        return ToolResult(ok=False, content="Give a query to search for, or a message_id.")
    query = query.strip()
    words = sorted(shared_words(query), key=len, reverse=True)[:QUERY_WORDS]
    found = []
    for row in candidates(ctx.script, query, words):
        message = row_to_message(row)
        if not may_hear(message_audience(message), ctx.audience):
            continue
        text = searchable_text(message).lower()
        score = len(set(words) & shared_words(text)) + 2 * (query.lower() in text)
        score += 2 * (message.get("tool_call_id") == query)
        if score:
            found.append((score, row.created_at, message))
    if not found:
        return ToolResult(ok=True, content=f"No archived message matches {query!r}.")
    found.sort(key=lambda item: (item[0], item[2]["position"]), reverse=True)
    lines = [
        describe(message, when) + snippet(message, query, words)
        for _, when, message in found[:limit]
    ]
    lines.append("Read one whole with search_history(message_id=<id>).")
    return ToolResult(
        ok=True, content="\n".join(lines), data={"ids": [m["id"] for *_, m in found[:limit]]}
    )


def candidates(script, query, words):
    """Return up to ``CANDIDATES`` archived rows of ``script``, newest first, among its newest
    ``SCAN_ROWS``, whose content holds the query or one of ``words``, or whose tool call id
    is the query."""
    rows = ConversationMessage.objects.filter(db_script_id=script.id, is_live=False).exclude(
        metadata__has_key=SUB_AGENT_KEY
    )
    oldest = rows.order_by("-position").values_list("position", flat=True)[
        SCAN_ROWS - 1 : SCAN_ROWS
    ]
    if oldest:
        rows = rows.filter(position__gte=oldest[0])
    condition = Q(tool_call_id=query)
    for text in {query, *words}:
        condition |= Q(content__icontains=text)
    return rows.filter(condition).order_by("-position", "-id")[:CANDIDATES]


def read_archived(ctx, message_id):
    """Return archived message ``message_id`` whole, within ``MAX_MESSAGE_CHARS``."""
    row = (
        ConversationMessage.objects.filter(pk=message_id, db_script_id=ctx.script.id, is_live=False)
        .exclude(metadata__has_key=SUB_AGENT_KEY)
        .first()
    )
    message = row and row_to_message(row)
    if not message or not may_hear(message_audience(message), ctx.audience):
        # Whether a message kept for others exists is theirs to know too.
        return ToolResult(ok=False, content=f"No archived message {message_id}.")
    text = searchable_text(message)
    if len(text) > MAX_MESSAGE_CHARS:
        text = f"{text[:MAX_MESSAGE_CHARS]} [... {len(text) - MAX_MESSAGE_CHARS} more characters]"
    return ToolResult(
        ok=True, content=f"{describe(message, row.created_at)}\n{text}", data={"id": message_id}
    )


def searchable_text(message):
    """Return what a message says: its content, and the tool calls it made."""
    calls = [tool_call_text(call) for call in message.get("tool_calls") or ()]
    return "\n".join(filter(None, [message.get("content"), *calls]))


def describe(message, when):
    """Return one archived message's heading: id, time, role and, for a result, its call."""
    call = f" (result of {message['tool_call_id']})" if message.get("tool_call_id") else ""
    return f"[{message['id']}] {when:%Y-%m-%d %H:%M} {message['role']}{call}:"


def snippet(message, query, words):
    """Return about ``SNIPPET_CHARS`` of the message around its first match (all of it if
    that is shorter), on one line."""
    text = " ".join(searchable_text(message).split())
    if len(text) <= SNIPPET_CHARS:
        return f" {text}"
    lowered = text.lower()
    found = [lowered.find(word) for word in (query.lower(), *words) if word in lowered]
    start = max(min(found, default=0) - SNIPPET_CHARS // 3, 0)
    cut = text[start : start + SNIPPET_CHARS]
    return f" {'…' if start else ''}{cut}{'…' if start + SNIPPET_CHARS < len(text) else ''}"


register_tool(
    Tool(
        name="search_history",
        description=(
            "Search your archived past (what summaries and placeholders replaced): a query "
            "lists matches, a message_id reads one whole."
        ),
        parameters={
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "Words or a tool call id."},
                "message_id": {
                    "type": "integer",
                    "minimum": 1,
                    "description": "An archived message's id.",
                },
                "limit": LIMIT_PARAMETER,
            },
            "additionalProperties": False,
        },
        categories=frozenset({"safe"}),
        handler=search_history,
    )
)
