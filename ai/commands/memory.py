"""The builders' view of an assistant's long-term memory: memories, journal, entity profiles."""

from django.db.models import Count, Q
from evennia.utils import logger
from evennia.utils.ansi import raw
from evennia.utils.dbserialize import deserialize
from twisted.internet import defer

from ..audience import describe_audience
from ..helpers.entity_context import entity_profiles
from ..helpers.memory_links import memory_namespace
from ..history import row_to_message
from ..models import ConversationMessage, EntityObservation, JournalEntry, MemoryLink
from ..semantic_memory import WORKER, search_memories
from ..sleep.record import sleep_record, step_line
from ..utils.wording import plural
from .common import (
    INDENT,
    AssistantCommand,
    find_assistant,
    fitted_table,
    indented,
    preview,
    privately,
    row_state,
    when,
)


def first_line(message, width):
    """Return the preview of a history message's first line (its tool calls if it made any)."""
    content = (message.get("content") or "").strip()
    return preview(dict(message, content=content.splitlines()[0] if content else ""), width)


# Memories that aimemory/search lists at most.
SEARCH_LIMIT = 10


@defer.inlineCallbacks
def search_every_memory(character, query, limit):
    """Return ``(link, score)`` for up to ``limit`` memories nearest ``query``, best first.

    Unlike ``semantic_memory.recall``, which keeps only what one audience may hear, this
    keeps every memory, private ones too: a builder sees all (Mem0 runs on its worker).

    Returns:
        Deferred: Fires with the list.
    """
    hits = yield WORKER.call(search_memories, memory_namespace(character), query, limit)
    links = MemoryLink.objects.filter(
        db_object_id=character.id, memory_id__in=[hit[0] for hit in hits]
    ).select_related("superseded_by")
    by_memory = {link.memory_id: link for link in links}
    # A memory without a link is unknown to the journal: recall never shows it either.
    return [(by_memory[memory_id], score) for memory_id, _, score in hits if memory_id in by_memory]


def memory_counts(assistant):
    """Count what ``assistant`` keeps: its memories, journal entries and observations.

    Returns:
        tuple: Three dicts: memory links (``remembered``, ``superseded`` of those, and
        ``pending``, still being added), journal entries (``total``, ``consolidated``,
        ``archived``) and entity observations (``total``, ``superseded``, ``entities``).
    """
    links = MemoryLink.objects.filter(db_object_id=assistant.id).aggregate(
        remembered=Count("id", filter=~Q(memory_id="")),
        superseded=Count("id", filter=~Q(memory_id="") & Q(invalid_at__isnull=False)),
        pending=Count("id", filter=Q(memory_id="")),
    )
    entries = JournalEntry.objects.filter(db_object_id=assistant.id).aggregate(
        total=Count("id"),
        consolidated=Count("id", filter=Q(consolidated=True)),
        archived=Count("id", filter=Q(archived=True)),
    )
    observations = EntityObservation.objects.filter(db_object_id=assistant.id).aggregate(
        total=Count("id"),
        superseded=Count("id", filter=Q(invalid_at__isnull=False)),
        entities=Count("entity", distinct=True),
    )
    return links, entries, observations


def last_sleep(record, asleep):
    """Return the heading of what the last sleep did: when it began, its dreaming ticks."""
    if not record:
        return "Last sleep: never."
    if "ticks" not in record:  # kept by a version that recorded only the last tick
        return f"Last sleep: {when(record.get('at'))} (not recorded in full)."
    began = f"began {when(record['began'])}, " if record.get("began") else ""
    now = "; asleep now" if asleep else ""
    return (
        f"Last sleep: {began}{plural(record['ticks'], 'dreaming tick')}, the last at "
        f"{when(record['at'])}{now}. What it did:"
    )


class CmdAiMemory(AssistantCommand):
    """
    Inspect an assistant's long-term memory: memories, journal, entity profiles.

    Usage:
      aimemory [<assistant>]
      aimemory/search [<assistant>] = <words>
      aimemory/show [<assistant>] = <link id>
      aimemory/profiles [<assistant>] [= <name>]

    Switches:
      search   - the memories nearest <words> in meaning, best first: each
                 one's link id, score, when and by which link it was superseded
                 (if it was), and its text cut to one line
      show     - one memory in full: its text, when it held, who may hear it,
                 the journal entry it came from and that entry's history
                 messages (live or archived)
      profiles - the entity profiles (or the one of <name>): the observations
                 that hold, and, indented below, those superseded, with when
                 and what replaced them

    Without a name, the only assistant in the room is shown. The plain form
    counts the memories (current and superseded), the journal entries
    (consolidated into memory, waiting for the next sleep, archived) and the
    entity profiles, then tells when the assistant last fell asleep, how many
    dreaming ticks that sleep had, and what each step did over all of them.
    What was whispered to the assistant is marked "(private to <name> (#dbref))":
    players never hear it, builders see it.

    The old spelling with the switch after the name (aimemory helper/search
    gate password) still works, with a reminder; it is deprecated.

    Examples:
      aimemory helper
      aimemory/search helper = gate password
      aimemory/show helper = 12
      aimemory/profiles helper = Char
    """

    key = "aimemory"
    switch_options = ("search", "show", "profiles")
    locks = "cmd:perm(Builder)"
    help_category = "AI"
    # Each form's usage; /search and /show need what follows the =.
    USAGES = {
        "": "aimemory [<assistant>]",
        "search": "aimemory/search [<assistant>] = <words>",
        "show": "aimemory/show [<assistant>] = <link id>",
        "profiles": "aimemory/profiles [<assistant>] [= <name>]",
    }

    def parse(self):
        """Parse ``aimemory/<switch> <assistant> = <argument>``, or the deprecated
        ``aimemory <assistant>/<switch> <argument>``."""
        super().parse()
        if not self.switches and "/" in self.lhs:
            self.parse_deprecated()
        self.switch = self.switches[0] if self.switches else ""
        self.name, self.argument = self.lhs, (self.rhs or "").strip()

    def parse_deprecated(self):
        """Read the switch after the name, as aimemory once did, and say how it is written now."""
        name, _, rest = self.args.partition("/")
        switch, _, argument = rest.strip().partition(" ")
        self.switches = [self.known_switch(switch)]
        self.lhs, self.rhs = name.strip(), argument.strip() or None
        now = f"aimemory/{self.switches[0]} {self.lhs}".rstrip()
        now += f" = {self.rhs}" if self.rhs else ""
        self.tell(f"(Deprecated spelling: write {now}.)")

    def func(self):
        forms = {
            "": self.overview,
            "search": self.search,
            "show": self.show,
            "profiles": self.profiles,
        }
        needs_argument = self.switch in ("search", "show")
        if (self.rhs is not None and not self.switch) or (needs_argument and not self.argument):
            self.tell(f"Usage: {self.USAGES[self.switch]}")
            return
        assistant = find_assistant(self.caller, self.name)
        if assistant is None:
            return
        text = forms[self.switch](assistant)
        if text:  # a search answers later, when its Deferred fires
            self.page(text)

    def overview(self, assistant):
        """Return the counts of memories, journal entries and profiles, and the last sleep."""
        script = assistant.assistant_script
        links, entries, observations = memory_counts(assistant)
        memories = (
            f"Memories: {links['remembered']} ({links['remembered'] - links['superseded']} "
            f"current, {links['superseded']} superseded)"
        )
        if links["pending"]:
            memories += f"; {links['pending']} being added"
        if not script.get_config("memory_enabled"):
            memories += "; memory_enabled is False: no new ones are made"
        last = deserialize(sleep_record(script)) or {}  # plain dicts, not the Attribute's
        current = script.db.asleep_since
        lines = [
            f"Long-term memory of |w{assistant.key}|n (aimemory/search, /show or /profiles "
            f"{assistant.key} = ... look closer):",
            f"{memories}.",
            f"Journal: {plural(entries['total'], 'entry', 'entries')}, "
            f"{entries['consolidated']} consolidated into "
            f"memory, {entries['total'] - entries['consolidated']} waiting for the next sleep; "
            f"{entries['archived']} archived.",
            f"Entity profiles: {observations['entities']} "
            f"({plural(observations['total'], 'observation')}, "
            f"{observations['superseded']} superseded).",
            # "asleep now" only of the sleep under way, not of the one before it.
            last_sleep(last, script.db.operating_mode == "sleep" and current == last.get("began")),
        ]
        for name, done in last.get("steps", {}).items() if "ticks" in last else ():
            lines.append(INDENT + step_line(name, done))
        return "\n".join(lines)

    def search(self, assistant):
        """Search every memory for the argument; the hits are sent when Mem0 answers."""
        caller, query = self.caller, self.argument
        self.tell(f"Searching the long-term memory of {assistant.key} for {raw(repr(query))}...")

        def report(hits):
            self.page(self.hits(assistant, query, hits, self.client_width()))

        def failed(failure):
            logger.log_err(f"AI {assistant.key}: aimemory search failed: {failure.getTraceback()}")
            # An error may run over several long lines (a configuration's validation).
            self.tell(
                raw(f"{assistant.key}: the memory search failed: {failure.getErrorMessage()}")
            )

        searching = search_every_memory(assistant, query, SEARCH_LIMIT)
        caller.ndb.aimemory_search = searching  # for whoever waits on it (tests)
        searching.addCallbacks(report, failed)
        return None

    def hits(self, assistant, query, hits, width):
        """Return the memories found for ``query``: link id, score, supersession, text."""
        if not hits:
            return f"{assistant.key} remembers nothing near {raw(repr(query))}."
        rows = [
            (
                str(link.id),
                f"{score:.2f}",
                when(link.invalid_at.isoformat()) if link.invalid_at else "-",
                str(link.superseded_by_id or "?") if link.invalid_at else "-",
            )
            for link, score in hits
        ]
        texts = [privately(link.text, link.audience) for link, _ in hits]
        table = fitted_table(("link", "score", "superseded", "by", "memory"), rows, texts, width)
        heading = (
            f"Memories of |w{assistant.key}|n nearest {raw(repr(query))}, best first "
            f"(aimemory/show {assistant.key} = <link> shows one in full):"
        )
        return f"{heading}\n{table}"

    def show(self, assistant):
        """Return one memory in full, with its journal entry and the messages it came from."""
        number = self.argument
        if not number.isdigit():
            return f"{raw(repr(number))} is not a link id: give the number /search shows."
        link = (
            MemoryLink.objects.filter(db_object_id=assistant.id, id=int(number))
            .select_related("entry", "superseded_by")
            .first()
        )
        if link is None:
            return f"{assistant.key} has no memory link {number}."
        heading = (
            f"Memory link {link.id} of |w{assistant.key}|n (Mem0 id "
            f"{link.memory_id or 'none yet: being added'}):"
        )
        facts = [f"Valid from: {when(link.valid_from.isoformat())}."]
        if link.invalid_at:
            newer = link.superseded_by
            by = f"link {newer.id}: {raw(newer.text)}" if newer else "a link since deleted"
            facts.append(f"Superseded: {when(link.invalid_at.isoformat())} by {by}")
        else:
            facts.append("Superseded: no, it holds.")
        older = list(link.supersedes.values_list("id", flat=True))
        if older:
            facts.append(f"Supersedes: link {', '.join(map(str, older))}.")
        facts.append(f"Audience: {describe_audience(link.audience)}.")
        lines = [
            heading,
            *indented(link.text, self.client_width()),
            *facts,
            *self.source(assistant, link.entry),
        ]
        return "\n".join(lines)

    def source(self, assistant, entry):
        """Return the lines telling a memory's journal entry and its history messages."""
        if entry is None:
            return ["Source entry: deleted from the journal (the next sleep drops this memory)."]
        score = "unscored" if entry.score is None else f"score {entry.score:g}"
        lines = [
            f"Source entry: {entry.entry_id} ({entry.source_type}, importance "
            f"{entry.importance}, {score}, {'archived' if entry.archived else 'not archived'})."
        ]
        ids = list(entry.source_message_ids or ())
        if not ids:
            return lines + ["History messages it came from: none recorded."]
        rows = list(
            ConversationMessage.objects.filter(
                db_script_id=assistant.assistant_script.id, id__in=ids
            )
        )
        lines.append("History messages it came from:")
        if rows:
            cells = [(str(row.id), str(row.position), row.role, row_state(row)) for row in rows]
            firsts = [first_line(row_to_message(row), self.client_width()) for row in rows]
            headers = ("row id", "position", "role", "state", "first line")
            lines.append(str(fitted_table(headers, cells, firsts, self.client_width())))
        gone = sorted(set(ids) - {row.id for row in rows})
        if gone:
            lines.append(f"No longer stored: {', '.join(map(str, gone))}.")
        return lines

    def profiles(self, assistant):
        """Return each entity's current observations, its superseded ones indented below."""
        profiles = entity_profiles(assistant)
        name = self.argument.lower()
        if name:
            profiles = {
                ref: profile
                for ref, profile in profiles.items()
                if name in (ref.lower(), profile["name"].lower())
            }
        if not profiles:
            about = f" of {raw(repr(self.argument))}" if name else "s"
            return f"{assistant.key} has no entity profile{about}."
        lines = [
            f"Entity profiles of |w{assistant.key}|n ({len(profiles)}; superseded "
            "observations indented below the current ones):"
        ]
        for ref, profile in profiles.items():
            observations = profile["observations"]
            current = [obs for obs in observations if not obs.get("invalid_at")]
            lines.append(
                f"|w{raw(profile['name'])}|n ({ref}): {len(current)} current, "
                f"{len(observations) - len(current)} superseded, updated "
                f"{when(profile['updated'])}"
            )
            for observation in current:
                text = privately(observation["text"], observation.get("audience"))
                lines.append(INDENT + raw(text))
            for observation in observations:
                if observation.get("invalid_at"):
                    text = privately(observation["text"], observation.get("audience"))
                    replaced = (
                        f"(superseded {when(observation['invalid_at'])} by: "
                        f"{observation.get('superseded_by') or 'one since deleted'})"
                    )
                    lines.append(INDENT * 2 + raw(f"{replaced} {text}"))
        return "\n".join(lines)
