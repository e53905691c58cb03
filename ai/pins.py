"""Pinned messages: history that no compaction summarizes or masks, within a cap.

A builder pins messages by row id, or pins a fact (``aicompact/pin``, ``aicompact/pinfact``);
the assistant pins a fact with the ``pin_fact`` tool. A pinned fact is a system message
``[PINNED FACT] <text>`` appended to the history, pinned, kept for the audience of the turn
that pinned it. Together, pinned messages may hold at most ``compact_pin_max_share`` of the
context window: every token they hold is one that compaction can never free.
"""

from django.db import transaction
from django.db.models import Sum

from .audience import message_audience, with_audience
from .llm_interaction import context_window
from .utils.markers import PINNED_FACT_MARKER
from .utils.token_counter import count_message_tokens

PINNED_FACT = "pinned_fact"


class PinRefused(Exception):
    """Pinning would take the pinned messages over their cap; nothing was pinned."""


def pinned_tokens(script):
    """Return the tokens the live pinned messages of ``script`` hold."""
    rows = script.history.live_rows().filter(pinned=True)
    return rows.aggregate(total=Sum("token_count"))["total"] or 0


def pin_cap(script):
    """Return ``(cap in tokens, how it is set)``, e.g. ``(10000, "compact_pin_max_share 0.1
    of max_context_tokens 100000")``."""
    share, window = script.get_config("compact_pin_max_share"), context_window(script)
    return int(share * window), f"compact_pin_max_share {share:g} of max_context_tokens {window}"


def check_cap(script, total):
    """Raise :class:`PinRefused` when pinned messages holding ``total`` tokens are over the cap."""
    cap, source = pin_cap(script)
    if total > cap:
        raise PinRefused(
            f"pinning this would hold {total:,} tokens, over the cap of {cap:,} ({source})"
        )


def pin_messages(script, message_ids, pinned=True):
    """Pin (or unpin) live messages with the rest of their tool-call units, within the cap.

    Returns:
        tuple: ``(ids, changed)``: the ids of the live messages named and the rest of their
        units, oldest first (empty when none of ``message_ids`` is live), and those of them
        that were not pinned (or unpinned) already.

    Raises:
        PinRefused: the pins would be over the cap; nothing changes.
    """
    with transaction.atomic():
        before = set(script.history.live_rows().filter(pinned=True).values_list("id", flat=True))
        ids = script.history.set_pinned(message_ids, pinned)
        if pinned:
            check_cap(script, pinned_tokens(script))  # raised: the pins are rolled back
    return ids, [message_id for message_id in ids if (message_id in before) != pinned]


def fact_message(script, text, by, audience=None):
    """Return the pinned ``[PINNED FACT]`` system message of ``text``, if the cap has room.

    Args:
        script (AssistantScript): Whose history it joins.
        text (str): The fact.
        by (str): Who pinned it: a builder's name, or ``assistant``.
        audience (list, optional): Who may hear it (``ai.audience``).

    Raises:
        PinRefused: the pins would be over the cap.
    """
    message = {
        "role": "system",
        "content": f"{PINNED_FACT_MARKER} {text}",
        "metadata": with_audience({"type": PINNED_FACT, "by": by}, audience),
        "pinned": True,
    }
    tokens = count_message_tokens(message, script.history.model)
    check_cap(script, pinned_tokens(script) + tokens)
    return message


def is_pinned_already(script, text, audience=None):
    """Return whether a live pinned fact of ``audience`` already says ``text``."""
    content, audience = f"{PINNED_FACT_MARKER} {text}", sorted(audience) if audience else None
    return any(
        message["content"] == content and message_audience(message) == audience
        for message in script.history.pinned_messages()
    )
