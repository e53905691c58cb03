"""Who may hear what: the audience of events, messages, journal entries and observations.

An audience is ``None`` for the whole room (public) or a list of dbrefs (private: what was
whispered to the assistant, and everything it wrote while answering, may reach only the
whisperer). A turn has the audience of the event it handles; everything it shows the
model is filtered to what that audience may hear, and everything it writes (history
messages, journal entries, entity observations, summaries) carries that audience. The
model cannot disclose what it is never shown.
"""

from evennia.utils.search import search_object

PUBLIC = None


def event_audience(event):
    """Return the audience of an event: its whisperer for a whisper, else public."""
    event = event or {}
    if event.get("type") == "whisper" and event.get("speaker"):
        return [event["speaker"]]
    return PUBLIC


def message_audience(message):
    """Return the audience a history message is kept for (``None``: public)."""
    return (message.get("metadata") or {}).get("audience") or PUBLIC


def may_hear(item_audience, listeners):
    """Tell whether everyone in ``listeners`` may hear an item kept for ``item_audience``.

    Args:
        item_audience (list or None): Whom the item is for (``None``: anyone).
        listeners (list or None): Who will hear what the model says (``None``: the room).
    """
    if not item_audience:
        return True
    return bool(listeners) and set(listeners) <= set(item_audience)


def may_supersede(newer_audience, older_audience):
    """Tell whether a fact kept for ``newer_audience`` may mark one kept for
    ``older_audience`` out of date: only when both are kept for the same listeners.

    A whisper never outdates what the room knows: one player would change what everyone is
    told. Nor does a public line outdate a whisper: another player could mark what one
    player whispered as no longer true, and a public turn would learn that the whisper
    exists ("It replaces 1 older fact").
    """
    return sorted(newer_audience or ()) == sorted(older_audience or ())


def narrowest(audiences):
    """Return the audience of what is drawn from items kept for ``audiences``: those who may
    hear every one of them (``None``: all are public).

    Raises:
        ValueError: when no one may hear them all (kept private for different listeners).
    """
    private = [set(audience) for audience in audiences if audience]
    if not private:
        return PUBLIC
    shared = set.intersection(*private)
    if not shared:
        raise ValueError("they were kept private for different listeners")
    return sorted(shared)


def visible_messages(messages, listeners):
    """Return the messages ``listeners`` may hear, in order."""
    return [m for m in messages if may_hear(message_audience(m), listeners)]


def with_audience(metadata, audience):
    """Return ``metadata`` (a dict or None) marked with ``audience`` when it is private."""
    metadata = dict(metadata or {})
    if audience:
        metadata["audience"] = sorted(audience)
    return metadata


def audience_groups(messages):
    """Split messages by audience: ``[(audience, messages), ...]``, the public group first.

    A tool call and its results share the audience of the turn that made them, so each
    group keeps whole units.
    """
    groups = {}
    for message in messages:
        audience = message_audience(message)
        groups.setdefault(tuple(audience) if audience else (), []).append(message)
    ordered = sorted(groups.items(), key=lambda item: item[0])
    return [(list(key) or PUBLIC, members) for key, members in ordered]


def listeners_of(audience):
    """Return the objects a private audience's dbrefs name (those that still exist)."""
    found = (search_object(ref) for ref in audience or ())
    return [objects[0] for objects in found if objects]


def describe_audience(audience):
    """Return how builders see an audience: ``public``, or ``private to <name> (#6)`` for each
    listener.

    A name, for that is who was whispered to; its dbref beside it, for two may share a name.
    """
    if not audience:
        return "public"
    return f"private to {', '.join(map(listener_name, audience))}"


def listener_name(ref):
    """Return ``<name> (#6)`` for the dbref ``#6``, or say that its object was deleted."""
    found = search_object(ref)
    return f"{found[0].key} ({ref})" if found else f"someone since deleted ({ref})"
