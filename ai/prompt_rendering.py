"""The text of each static prompt component, rendered from live game state."""

from dataclasses import dataclass, field
from functools import cached_property

from django.utils import timezone

from .helpers.entity_context import observations_for
from .helpers.goals import describe_goal, goal_tree, has_active_goals
from .helpers.journal import search_entries, shared_words
from .helpers.memory_links import remembered_entries
from .helpers.working_memory import conversations
from .utils.markers import CONVERSATION_LINE
from .utils.message_format import REQUEST_VERB, one_line, quoted

MAX_PROFILE_OBSERVATIONS = 5
MAX_BUFFER_LINES = 10
MAX_RECALLED_ENTRIES = 3
# Lines of one recalled compaction synthesis, at most.
MAX_SYNTHESIS_LINES = 3
# Goals the goals component lists at most, the most urgent first.
MAX_GOAL_LINES = 12
GOALS_HEADER = "Your goals, most urgent first (#<number> names a goal for the goal tools):"


@dataclass
class PromptState:
    """What a prompt is rendered from.

    Attributes:
        script (AssistantScript): The assistant's script.
        character (AssistantCharacter): The assistant.
        config (ContextConfig): The context type of this call.
        event (dict): The pending event, if any.
        tool_result (str): The previous tool's outcome, if any.
        memories (list): Recalled long-term facts, if any.
        history (list): The history messages this call may send.
        audience (list or None): Who hears what the model says (see ``ai.audience``);
            journal entries and observations kept for others are not rendered.
    """

    script: object
    character: object
    config: object
    event: dict | None = None
    tool_result: str | None = None
    memories: list = field(default_factory=list)
    history: list = field(default_factory=list)
    audience: list | None = None

    @cached_property
    def live_ids(self):
        """The ids of ``history``'s messages: worked out only by a component that reads
        them (the recall, once a run), not on every call of a long history."""
        return {message["id"] for message in self.history if "id" in message}

    def fields(self):
        """Return the values that component templates may use as ``{placeholders}``."""
        location = self.character.location
        return {
            "name": self.character.key,
            "location": location.key if location else "nowhere",
            "mode": self.script.db.operating_mode,
        }


# How each kind of event reads in history; the player's words follow as one quoted unit.
EVENT_VERBS = {"whisper": "whispers to you", "pose": "emotes", "request": REQUEST_VERB}


def render_event(event):
    """Return the history text of a queued event, e.g. ``Bob says, "hi"``.

    The words are one JSON-quoted unit: a line break, a quote or a ``[CONTEXT SUMMARY]``
    inside them cannot make a line that looks like anything but Bob's words. (Measured on
    a small local model, a quoted line was also answered where ``Bob says: hi`` was echoed.)
    An arrival has no words; a gift's object is named as one quoted unit too (players name
    what they create).
    """
    speaker = one_line(event.get("speaker_name")) or "Someone"
    if event.get("type") == "arrival":
        return f"{speaker} arrives."
    if event.get("type") == "given":
        return f"{speaker} gives you {quoted(event.get('item', ''))}."
    verb = EVENT_VERBS.get(event.get("type"), "says")
    return f"{speaker} {verb}, {quoted(event.get('text', ''))}"


def present_characters(character):
    """Return the other characters in the assistant's room."""
    location = character.location
    if not location:
        return []
    return location.contents_get(exclude=character, content_type="character")


def whereabouts(character):
    """Return the prompt's line of where ``character`` is and who is there, or ""."""
    if not character.location:
        return ""
    present = ", ".join(obj.key for obj in present_characters(character)) or "nobody"
    return f"You are in {character.location.key}. Present: {present}."


# Things the character context names that the assistant carries, at most.
CARRIED_SHOWN = 10


def render_character_context(state):
    character = state.character
    lines = [f"You are {character.key}, currently {state.script.db.operating_mode}."]
    description = character.db.desc
    if description:
        lines.append(f"Your description: {description}")
    if character.location:
        lines.append(whereabouts(character))
    carried = [obj.key for obj in character.contents if obj.destination is None]
    if carried:
        more = len(carried) - CARRIED_SHOWN
        shown = ", ".join(carried[:CARRIED_SHOWN])
        lines.append(f"You carry: {shown}{f' and {more} more' if more > 0 else ''}.")
    return "\n".join(lines)


def render_entity_context(state):
    present = present_characters(state.character)
    lines = []
    for obj in present:
        observed = observations_for(
            state.character, obj.dbref, state.audience, MAX_PROFILE_OBSERVATIONS
        )
        if observed:
            lines.append(f"{obj.key} ({obj.dbref}): " + "; ".join(map(one_line, observed)))
    profiles = ["What you know of those present:", *lines] if lines else []
    return "\n".join(profiles + render_working_memory(state, {obj.dbref for obj in present}))


def render_working_memory(state, present):
    """Return one line per conversation with someone ``present``, as far as the audience
    may hear: ``Talking with Dana since 14:02.``

    Only who and since when: what they said is in the history already, and a small model
    shown the last line heard once more repeated it as its answer (real-model evaluation).
    Nothing that changes every turn either, so the prompt's prefix stays reusable: the
    lines come in the order the conversations began (the latest speaker first reordered
    them whenever someone else spoke).
    """
    ttl = state.script.get_config("working_memory_ttl")
    talks = conversations(state.character, state.audience, ttl)
    lines = []
    for talk in sorted(talks, key=lambda talk: (talk["started_at"], talk["speaker"])):
        if talk["speaker"] in present:
            since = timezone.localtime(talk["started_at"]).strftime("%H:%M")
            lines.append(f"{CONVERSATION_LINE}{one_line(talk['speaker_name'])} since {since}.")
    return lines


def render_semantic_memories(state):
    """Long-term memories recalled for the event, then journal entries relevant to it that
    history no longer shows and long-term memory does not hold."""
    recalled = list(state.memories)
    query = recall_query(state.event)
    if query:
        entries = search_entries(
            state.character,
            query,
            MAX_RECALLED_ENTRIES,
            exclude_sources=state.live_ids,
            audience=state.audience,
        )
        if state.script.get_config("memory_enabled"):
            # Facts already in long-term memory come from there, marked if out of date.
            remembered = remembered_entries(state.character, [e["id"] for e in entries])
            entries = [entry for entry in entries if entry["id"] not in remembered]
        for entry in entries:
            recalled += recalled_lines(entry, query)
    if not recalled:
        return ""
    return "Things you remember:\n" + "\n".join(f"- {one_line(memory)}" for memory in recalled)


def recall_query(event):
    """Return what memories are recalled by for ``event``: its speaker's name and words (or
    the object given)."""
    event = event or {}
    return " ".join(filter(None, [event.get("speaker_name"), event.get("text"), event.get("item")]))


def recalled_lines(entry, query):
    """Return what of a journal entry to recall: the entry, or a synthesis's relevant lines.

    A compaction's synthesis is a whole summary; only its lines that share a telling word
    with the query are recalled (its first lines when none does), one memory each.
    """
    if entry.get("source_type") != "compaction":
        return [entry["content"]]
    lines = [line for line in entry["content"].splitlines()[1:] if line.strip()]
    wanted = telling_words(query)
    relevant = [line for line in lines if wanted & telling_words(line)]
    return (relevant or lines)[:MAX_SYNTHESIS_LINES]


def telling_words(text):
    """Return the words of ``text`` longer than three letters ("the", "was" tell nothing)."""
    return {word for word in shared_words(text) if len(word) > 3}


def render_context_buffer(state):
    # Quoted one unit a line: a player's pose must not read as a line of instructions.
    heard = list(state.character.ndb.context_buffer or [])[-MAX_BUFFER_LINES:]
    return "Recently around you:\n" + "\n".join(quoted(line) for line in heard) if heard else ""


def render_goals(state):
    """The active goals the turn's audience may hear, most urgent first, each step under
    its goal; at most ``MAX_GOAL_LINES`` (the least urgent are left out, and counted).
    Without an active goal (a kept answer, ``has_active_goals``) nothing is read."""
    if not has_active_goals(state.character):
        return ""
    tree = goal_tree(state.character, state.audience)
    if not tree:
        return ""
    lines = [f"{'  ' * (depth - 1)}- {describe_goal(goal)}" for goal, depth in tree]
    if len(lines) > MAX_GOAL_LINES:
        lines = lines[:MAX_GOAL_LINES] + [f"(and {len(lines) - MAX_GOAL_LINES} less urgent)"]
    return GOALS_HEADER + "\n" + "\n".join(lines)


def render_pending_event(state):
    event = state.event
    if not event:
        return ""
    if event.get("instruction"):
        return event["instruction"]
    if event.get("in_history"):
        # The event is the last message already; an instruction after it made a small
        # local model repeat the player's line instead of answering it.
        return ""
    return f"Handle this now: {render_event(event)}"


def render_tool_result(state):
    return f"Result of your last action: {state.tool_result}" if state.tool_result else ""


RENDERERS = {
    "character_context": render_character_context,
    "entity_context": render_entity_context,
    "semantic_memories": render_semantic_memories,
    "context_buffer": render_context_buffer,
    "goals": render_goals,
    "pending_event": render_pending_event,
    "tool_result": render_tool_result,
}
