"""In-game commands of the assistant, and the command set that carries them.

Add ``AssistantCmdSet`` to your ``CharacterCmdSet`` (see the README).
"""

from difflib import get_close_matches
from pprint import pformat
from textwrap import wrap

from django.db.models import Count, Q
from evennia.commands.cmdset import CmdSet
from evennia.commands.command import Command
from evennia.commands.default.muxcommand import MuxCommand
from evennia.utils import evmore, logger
from evennia.utils.ansi import raw
from evennia.utils.dbserialize import deserialize
from evennia.utils.evtable import EvTable
from evennia.utils.utils import inherits_from
from twisted.internet import defer

from .audience import describe_audience, message_audience
from .config import SCRIPT_CONFIG, ConfigError, compact_strategy, parse_value
from .confirmation import NoSuchCall, confirm_call, discard_call, waiting_calls
from .helpers.entity_context import entity_profiles
from .helpers.journal import journal_entries
from .helpers.memory_links import memory_namespace
from .history import row_to_message
from .llm_interaction import call_options, model_problem, resolve_model
from .models import (
    CompactionRecord,
    ConversationMessage,
    EntityObservation,
    JournalEntry,
    MemoryLink,
)
from .pins import PinRefused, fact_message, pin_cap, pin_messages, pinned_tokens
from .semantic_memory import WORKER, search_memories
from .sleep.compaction import ACCURACY_WARNING_AT, compact_conversation_history
from .sleep.extraction import ExtractionBeforeSummary
from .sleep.undo import UndoRefused, undo_last_compaction
from .tool_offering import tool_offering
from .utils.markers import SUMMARY_MARKER
from .utils.message_format import is_summary, summary_text, tool_call_text

ASSISTANT_TYPECLASS = "ai.assistant_character.AssistantCharacter"
INDENT = "    "
# The metadata type of a tool output that compaction masked (a placeholder in its place).
MASKED = "masked"
PINNED_MARK = "[pinned]"


def find_assistant(caller, name):
    """Find one assistant by name (in the room first, then anywhere) or tell the caller why not.

    Returns:
        AssistantCharacter or None.
    """
    if not name:
        here = caller.location.contents if caller.location else []
        found = [obj for obj in here if inherits_from(obj, ASSISTANT_TYPECLASS)]
        if len(found) == 1:
            return found[0]
        caller.msg("Name the assistant: there is not exactly one here.")
        return None
    found = caller.search(name, global_search=True, typeclass=ASSISTANT_TYPECLASS, quiet=True)
    if len(found) != 1:
        caller.msg(f"Found {len(found)} assistants matching '{name}'; name exactly one.")
        return None
    return found[0]


class CmdTalk(MuxCommand):
    """
    Talk to an AI assistant in the room.

    Usage:
      talk <assistant> = <message>
      talk <message>            (when one assistant is here)

    Everyone in the room hears you; the assistant answers on its next tick.

    Examples:
      talk helper = Where is the blacksmith?
      talk Hello there!
    """

    key = "talk"
    aliases = ["ask"]
    locks = "cmd:all()"
    help_category = "AI"

    def func(self):
        caller = self.caller
        if not self.args.strip():
            caller.msg("Usage: talk <assistant> = <message>")
            return
        name, message = (self.lhs, self.rhs) if self.rhs else ("", self.args.strip())
        assistant = find_assistant(caller, name.strip())
        if assistant is None:
            return
        if assistant.location != caller.location:
            caller.msg(f"{assistant.key} is not here.")
            return
        caller.location.msg_contents(
            f'{caller.key} says to {assistant.key}, "{message}"', exclude=[caller, assistant]
        )
        caller.msg(f'You say to {assistant.key}, "{message}"')
        assistant.hear(caller, message, event_type="talk")


class CmdAiMode(MuxCommand):
    """
    Show or switch an assistant's operating mode.

    Usage:
      aimode <assistant>
      aimode <assistant> = awake|sleep

    An assistant asleep runs its memory work (the sleep pipeline) and wakes when a
    player speaks to it. When its model cannot answer until its configuration
    changes (a key missing or refused, an option refused), it says why.

    Examples:
      aimode helper
      aimode helper = sleep
    """

    key = "aimode"
    locks = "cmd:perm(Builder)"
    help_category = "AI"

    def func(self):
        assistant = find_assistant(self.caller, self.lhs.strip())
        if assistant is None:
            return
        script = assistant.assistant_script
        if self.rhs:
            mode = self.rhs.strip().lower()
            if mode == "sleep":
                script.fall_asleep(f"put to sleep by {self.caller.key}")
            elif mode == "awake":
                script.wake_up(f"woken by {self.caller.key}")
            else:
                self.caller.msg(f"Unknown mode '{mode}': use awake or sleep.")
                return
        if script.db.operating_mode == "sleep":
            self.caller.msg(f"{assistant.key} is asleep ({script.db.sleep_phase}).")
        else:
            self.caller.msg(f"{assistant.key} is awake.")
        problem = model_problem(script)
        if problem:
            self.caller.msg("\n".join(wrap(f"It cannot answer: {problem}", 78)))


def shortened(text, width):
    """Return ``text`` cut to ``width`` characters, ending with … when it was cut."""
    return text if len(text) <= width else text[: width - 1] + "…"


def in_full(label, value, width):
    """Return ``label`` and the whole of ``value`` within ``width`` columns.

    A value whose repr fits follows the label on its line; a longer one goes on indented
    lines below it: text as it is, any other value pretty-printed, long lines wrapped.
    """
    if len(label) + len(repr(value)) <= width:
        return raw(label + repr(value))
    if not isinstance(value, str):
        value = pformat(value, width=width - len(INDENT), sort_dicts=False)
    lines = [label.rstrip()]
    for line in value.splitlines():
        lines += wrap(line, width, initial_indent=INDENT, subsequent_indent=INDENT) or [""]
    return raw("\n".join(lines))


class CmdAiConfig(MuxCommand):
    """
    Show or change an assistant's configuration.

    Usage:
      aiconfig <assistant>
      aiconfig <assistant>/<attribute>
      aiconfig <assistant>/<attribute> = <value>

    The first form lists every attribute, its value (a long one cut with …)
    and its meaning. The second shows one attribute in full, with its default
    and what it allows. The third changes it: give yes or no (true/false,
    on/off) for a switch, plain text for a model name or a prompt (None for
    none), a number, or a Python literal such as {'temperature': 0.3}. A value
    out of range is refused with the allowed range, and nothing changes.

    Examples:
      aiconfig helper
      aiconfig helper/llm_options
      aiconfig helper/compact_sleep_threshold = 0.6
      aiconfig helper/compact_enabled = no
      aiconfig helper/llm_model = openai/gpt-4o-mini
    """

    key = "aiconfig"
    locks = "cmd:perm(Builder)"
    help_category = "AI"

    def func(self):
        name, _, attribute = self.lhs.partition("/")
        assistant = find_assistant(self.caller, name.strip())
        if assistant is None:
            return
        script = assistant.assistant_script
        attribute = attribute.strip()
        if not attribute:
            if self.rhs is None:
                self.caller.msg(self.listing(assistant, script.effective_config()))
            else:
                self.caller.msg("Usage: aiconfig <assistant>/<attribute> = <value>")
            return
        if attribute not in SCRIPT_CONFIG:
            close = get_close_matches(attribute.lower(), SCRIPT_CONFIG, n=3)
            hint = f" Did you mean: {', '.join(close)}?" if close else ""
            self.caller.msg(
                f"{assistant.key} has no configuration attribute {attribute!r}.{hint} "
                f"aiconfig {assistant.key} lists them all."
            )
            return
        if self.rhs is None:
            self.caller.msg(self.in_detail(assistant, attribute, script.get_config(attribute)))
            return
        try:
            value = parse_value(attribute, self.rhs)
            script.set_config(attribute, value)
        except ConfigError as err:
            self.caller.msg(f"{err}; nothing changed.")
            return
        self.caller.msg(in_full(f"{assistant.key}: {attribute} = ", value, self.client_width()))

    def listing(self, assistant, config):
        """Return every attribute as ``name = value`` (cut to one line) over its meaning."""
        width = self.client_width()
        lines = wrap(
            f"Configuration of {assistant.key} (aiconfig {assistant.key}/<attribute> shows "
            "one in full, with its default and what it allows):",
            width,
        )
        for name, option in SCRIPT_CONFIG.items():
            value = shortened(repr(config[name]), width - len(f"{name} = "))
            lines.append(f"|w{name}|n = {raw(value)}")
            lines += wrap(
                option.description, width, initial_indent=INDENT, subsequent_indent=INDENT
            )
        return "\n".join(lines)

    def in_detail(self, assistant, name, value):
        """Return one attribute's value and default in full, what it allows and its meaning."""
        width = self.client_width()
        option = SCRIPT_CONFIG[name]
        lines = [
            in_full(f"{assistant.key}/{name} = ", value, width),
            in_full("default: ", option.default, width),
            *wrap(f"allowed: {option.allowed}", width, subsequent_indent=INDENT),
            *wrap(f"meaning: {option.description}", width, subsequent_indent=INDENT),
        ]
        return "\n".join(lines)


def indented(text, width):
    """Return the lines of ``text`` as typed (uncoloured), each wrapped, all indented."""
    lines = []
    for line in text.splitlines():
        lines += wrap(raw(line), width, initial_indent=INDENT, subsequent_indent=INDENT)
    return lines


def summary_block(message):
    """Return a summary message's metadata on one line, then its whole text."""
    metadata = message["metadata"]
    text = summary_text(message["content"])
    audience = message_audience(message)
    private = f"{describe_audience(audience)}, " if audience else ""
    return (
        f"|wSummary {message['id']}|n ({metadata.get('kind', '?')}, {private}compaction "
        f"#{metadata.get('successive_compactions', 1)} in a row, "
        f"{when(metadata.get('compacted_at'))}): replaced "
        f"{metadata.get('compacted_count', '?')} messages, "
        f"{metadata.get('original_token_count', '?')} → "
        f"{metadata.get('summary_token_count', '?')} tokens:\n{text}"
    )


def privately(text, audience):
    """Return ``text`` marked ``(private to #N)`` when ``audience`` is private."""
    return f"({describe_audience(audience)}) {text}" if audience else text


def preview(message, width):
    """Return one line of at most ``width`` characters that stands for ``message``."""
    metadata = message.get("metadata") or {}
    if is_summary(message):
        text = (
            f"{SUMMARY_MARKER} {metadata.get('compacted_count', '?')} msgs, "
            f"{metadata.get('kind', '?')}, successive #{metadata.get('successive_compactions', 1)}"
        )
    elif metadata.get("type") == MASKED:
        text = masked_text(metadata)
    elif message.get("tool_calls"):
        text = " ".join(f"→ {tool_call_text(call)}" for call in message["tool_calls"])
    else:
        text = message.get("content") or ""
    # What was whispered is marked, for builders alone see it.
    text = privately(text, message_audience(message))
    if message.get("pinned"):
        text = f"{PINNED_MARK} {text}"
    return shortened(" ".join(text.split()), width)


def masked_text(metadata):
    """Return what a masked tool output stood for: its tool, size and when it was masked."""
    # Short enough for the history table's preview column: the minute it was archived.
    return (
        f"[masked {metadata.get('original_tool', '?')}, "
        f"{metadata.get('original_token_count', '?')} tokens, "
        f"{when(metadata.get('archived_at'))[:16]}]"
    )


def first_line(message, width):
    """Return the preview of a history message's first line (its tool calls if it made any)."""
    content = (message.get("content") or "").strip()
    return preview(dict(message, content=content.splitlines()[0] if content else ""), width)


def when(iso):
    """Return an ISO timestamp as ``YYYY-MM-DD HH:MM:SS``, or ``never`` for None."""
    return iso[:19].replace("T", " ") if iso else "never"


def fitted_table(headers, rows, texts, width):
    """Return an EvTable within ``width``: ``rows`` under the first headers, ``texts`` last.

    Args:
        headers (tuple): Every column's header; the last one heads ``texts``.
        rows (list): Tuples of strings, one cell per header but the last.
        texts (list): One text per row, cut with … to the room the other columns leave.
        width (int): The client's width.
    """
    # A column is as wide as its widest cell and a space either side; the text gets the rest.
    room = width - sum(max(map(len, column)) + 2 for column in zip(headers[:-1], *rows)) - 2
    table = EvTable(*(f"|w{header}|n" for header in headers), border="header")
    for row, text in zip(rows, texts):
        table.add_row(*row, shortened(" ".join(text.split()), room))
    return table


def message_table(messages, width):
    """Return an EvTable of history messages within ``width``: row id, role, tokens, preview."""
    rows = [(str(msg["id"]), msg["role"], str(msg["token_count"])) for msg in messages]
    previews = [preview(message, width) for message in messages]
    return fitted_table(("row id", "role", "tokens", "preview"), rows, previews, width)


def row_state(row):
    """Return whether a history row is ``live`` or archived, and in which summary."""
    if row.is_live:
        return "live"
    return f"archived in {row.replaced_by_id}" if row.replaced_by_id else "archived"


def tools_offered(script):
    """Return how the assistant's model is offered tools, and who chose (see
    ``ai.tool_offering``)."""
    try:
        option = call_options(script).get("tools_as_text")
    except ConfigError:
        option = None  # The gateway refuses the call and logs why.
    return tool_offering(resolve_model(script), option)


def summaries_of(script):
    """Return every compaction summary row of ``script`` (live or archived), oldest first."""
    rows = ConversationMessage.objects.filter(db_script_id=script.id, role="system").order_by("id")
    return [row for row in rows if (row.metadata or {}).get("type") == "compaction"]


def pins_held(script):
    """Return how much of the pin cap the pinned messages of ``script`` hold, as a sentence."""
    cap, source = pin_cap(script)
    return f"Pins hold {pinned_tokens(script):,} of {cap:,} tokens ({source})."


def record_line(record):
    """Return one compaction record: its kind, strategy, time, figures and whether undone."""
    result = record.result or {}
    figures = (
        f"{result.get('compacted_messages', '?')} messages, "
        f"{result.get('original_tokens', '?')} → {result.get('new_tokens', '?')} tokens"
    )
    state = f"undone {when(record.undone_at.isoformat())}" if record.undone_at else "in effect"
    return (
        f"#{record.id} {record.kind} {record.strategy}, {when(record.created_at.isoformat())}: "
        f"{figures}; {state}"
    )


class CmdAiHistory(MuxCommand):
    """
    Inspect an assistant's context: usage, live history, journal and compactions.

    Usage:
      aihistory [<assistant>]
      aihistory/journal [<assistant>]
      aihistory/compactions [<assistant>]
      aihistory/archived [<assistant>] <row id>
      aihistory/pins [<assistant>]

    Switches:
      journal     - the journal's entries in full, newest last (syntheses too)
      compactions - every compaction (kind, strategy, figures, undone or not),
                    every summary, live or archived, and the syntheses
      archived    - one summary (or masked tool output) in full, then the
                    messages it replaced
      pins        - the pinned messages, and how much of their cap they hold

    Without a name, the only assistant in the room is shown. The plain form shows
    how full the context is against the compaction thresholds, how tools are
    offered to the model (natively or listed as text, and who chose), each live summary
    in full with its metadata, the journal's synthesis entries, then the live
    history, oldest first: each message's row id (the one aicompact/pin and
    aihistory/archived take), role, tokens and a preview; in it, summaries read
    "[CONTEXT SUMMARY] n msgs, kind, successive #k", a masked tool output reads
    "[masked <tool>, n tokens, <when it was archived>]", and a pinned message
    starts with "[pinned]". What was whispered to the assistant (and its
    answer) is marked "(private to #dbref)": players never see it, builders do.

    Examples:
      aihistory
      aihistory/compactions helper
      aihistory/archived helper 42
      aihistory/pins helper
    """

    key = "aihistory"
    switch_options = ("journal", "compactions", "archived", "pins")
    locks = "cmd:perm(Builder)"
    help_category = "AI"

    def func(self):
        name = self.args.strip()
        if "archived" in self.switches:
            name, _, summary_id = name.rpartition(" ")
            if not summary_id.isdigit():
                self.caller.msg("Usage: aihistory/archived [<assistant>] <row id>")
                return
        assistant = find_assistant(self.caller, name.strip())
        if assistant is None:
            return
        script = assistant.assistant_script
        if "journal" in self.switches:
            text = self.journal(assistant)
        elif "compactions" in self.switches:
            text = self.compactions(assistant, script)
        elif "archived" in self.switches:
            text = self.archived(assistant, script, int(summary_id))
        elif "pins" in self.switches:
            text = self.pins(assistant, script)
        else:
            text = self.overview(assistant, script)
        evmore.msg(self.caller, text, session=self.session)

    def overview(self, assistant, script):
        """Return the context usage against the thresholds, then the live history."""
        try:
            usage = script.context_usage()
        except ValueError as err:
            return f"Cannot measure the context of {assistant.key}: {err}"
        config = script.effective_config()
        thresholds = []
        for label in ("sleep", "emergency"):
            threshold = config[f"compact_{label}_threshold"]
            state = "|rcrossed|n" if usage.usage >= threshold else "not reached"
            thresholds.append(f"{label} {threshold:.0%} ({state})")
        messages = script.history.messages()
        lines = [
            f"|w{assistant.key}|n context: {usage.total_tokens}/{usage.max_tokens} tokens "
            f"({usage.usage:.1%}); thresholds: {', '.join(thresholds)}",
            f"History: {usage.history_tokens} tokens ({usage.history_usage:.1%}) in "
            f"{usage.message_count} messages. Model: {script.history.model}. "
            f"Last compaction: {when(script.db.last_compaction)}.",
            tools_offered(script),
        ]
        for message in messages:
            successive = message["metadata"].get("successive_compactions") or 0
            if is_summary(message) and successive >= ACCURACY_WARNING_AT:
                lines.append(
                    f"|rWarning:|n summary {message['id']} is compaction #{successive} in a "
                    "row; accuracy degrades after several successive compactions. Check the "
                    "journal's synthesis entries (aihistory/journal)."
                )
        lines += [summary_block(message) for message in messages if is_summary(message)]
        syntheses = [
            f"{entry['id']} ({when(entry.get('timestamp'))})"
            for entry in journal_entries(assistant, "compaction")
        ]
        lines.append(f"Synthesis entries in the journal: {', '.join(syntheses) or 'none'}.")
        if messages:
            lines.append(
                "Live history (aihistory/archived <row id> shows what a summary replaced):"
            )
            lines.append(str(message_table(messages, self.client_width())))
        else:
            lines.append("No live history.")
        return "\n".join(lines)

    def journal(self, assistant):
        """Return the journal's entries, oldest first, each in full within the client width."""
        entries = journal_entries(assistant)
        if not entries:
            return f"{assistant.key}'s journal is empty."
        width = self.client_width()
        blocks = [f"Journal of |w{assistant.key}|n ({len(entries)} entries, newest last):"]
        for entry in entries:
            about = [f"importance {entry.get('importance', '?')}", entry.get("source_type", "?")]
            if entry.get("audience"):
                about.append(describe_audience(entry["audience"]))
            if entry.get("tags"):
                about.append("tags: " + ", ".join(entry["tags"]))
            header = raw(f"{entry['id']} ({'; '.join(about)})")
            blocks += wrap(header, width, subsequent_indent=INDENT)
            blocks += indented(entry["content"], width)
        return "\n".join(blocks)

    def compactions(self, assistant, script):
        """Return every compaction record, every summary with its metadata, and the
        synthesis entries' ids."""
        records = CompactionRecord.objects.filter(db_script_id=script.id)
        summaries = summaries_of(script)
        if not (records or summaries):
            return f"{assistant.key} has never compacted its context."
        width = self.client_width()
        lines = [f"Compactions of |w{assistant.key}|n (oldest first):"]
        for record in records:
            lines += wrap(record_line(record), width, subsequent_indent=INDENT)
        in_effect = [record for record in records if not record.undone_at]
        if in_effect:
            lines.append(f"aicompact/undo {assistant.key} undoes #{in_effect[-1].id}.")
        unrecorded = [str(row.pk) for row in summaries if row.made_by_id is None]
        if unrecorded:
            lines += wrap(
                f"Made before compactions were recorded (no undo): summary {', '.join(unrecorded)}.",
                width,
            )
        if summaries:
            lines += ["Summaries (oldest first):", str(self.summary_table(summaries))]
        syntheses = [entry["id"] for entry in journal_entries(assistant, "compaction")]
        lines += wrap(f"Synthesis entries in the journal: {', '.join(syntheses) or 'none'}.", width)
        return "\n".join(lines)

    @staticmethod
    def summary_table(summaries):
        """Return an EvTable of summary rows within 78 columns: id, state, kind, time (to the
        minute), messages, tokens and which successive compaction (#) it was."""
        table = EvTable(
            "|wid|n",
            "|wstate|n",
            "|wkind|n",
            "|wcompacted at|n",
            "|wmsgs|n",
            "|wtokens|n",
            "|w#|n",
            border="header",
        )
        for summary in summaries:
            metadata = summary.metadata
            table.add_row(
                summary.pk,
                row_state(summary),
                metadata.get("kind", "?"),
                when(metadata.get("compacted_at"))[:16],
                metadata.get("compacted_count", "?"),
                f"{metadata.get('original_token_count', '?')} → "
                f"{metadata.get('summary_token_count', '?')}",
                metadata.get("successive_compactions", 1),
            )
        return table

    def archived(self, assistant, script, row_id):
        """Return a summary or masked tool output in full, then the messages it replaced."""
        row = ConversationMessage.objects.filter(db_script_id=script.id, pk=row_id).first()
        replaced = script.history.archived_by(row_id) if row else []
        message = row and row_to_message(row)
        if not (replaced or (message and is_summary(message))):
            return (
                f"{row_id} is not a summary or masked output of {assistant.key}'s history; "
                "see aihistory/compactions."
            )
        if is_summary(message):
            heading, what = summary_block(message), f"summary {row_id}"
        else:
            described = preview(message, self.client_width() - len(f"Message {row_id}: "))
            heading, what = f"|wMessage {row_id}|n: {described}", f"message {row_id}"
        return (
            f"{heading}\nMessages replaced by {what}:\n"
            f"{message_table(replaced, self.client_width())}"
        )

    def pins(self, assistant, script):
        """Return the pinned messages and how much of the cap they hold."""
        pinned = script.history.pinned_messages()
        held = pins_held(script)
        if not pinned:
            return "\n".join(
                wrap(f"{assistant.key} has no pinned messages. {held}", self.client_width())
            )
        heading = f"Pinned messages of |w{assistant.key}|n ({len(pinned)}, oldest first):"
        table = message_table(pinned, self.client_width())
        return "\n".join([heading, str(table), *wrap(held, self.client_width())])


@defer.inlineCallbacks
def manual_compaction(script, character):
    """Journal the history's facts, then compact it whatever its usage.

    Returns:
        Deferred: Fires with ``(extraction result, compaction result)``.
    """
    extraction = ExtractionBeforeSummary(script, character)
    compaction = yield compact_conversation_history(
        script, character, force=True, kind="manual", extract=extraction
    )
    return extraction.result, compaction


def compaction_report(extraction, compaction):
    """Return one line telling a builder what a manual compaction did."""
    note = extraction.get("reason") or (
        None if extraction["success"] else f"extraction stopped: {extraction['stop_reason']}"
    )
    facts = f"{extraction['facts_recorded']} facts journaled" + (f" ({note})" if note else "")
    masked = compaction.get("masking") or {}
    if masked.get("success"):  # a hybrid compaction masked, then summarized
        facts += f"; masked {masked['compacted_messages']} old tool outputs"
    if compaction.get("skipped"):
        hint = f" ({compaction['hint']})" if compaction.get("hint") else ""
        return f"{facts}; compaction skipped: {compaction['reason']}{hint}."
    if not compaction["success"]:
        return f"{facts}; compaction failed: {compaction['error']}."
    what = "old tool outputs masked" if "placeholder_ids" in compaction else "messages"
    text = (
        f"{facts}; compacted {compaction['compacted_messages']} {what}: "
        f"{compaction['original_tokens']} → {compaction['new_tokens']} tokens "
        f"({compaction['reduction_pct']:.0f}% less)."
    )
    summary = compaction.get("summary")
    if summary:  # a hybrid compaction masked, and its summary did not follow
        text += f" No summary: {summary.get('error') or summary.get('reason')}."
    if compaction.get("successive_compactions", 0) >= ACCURACY_WARNING_AT:
        text += (
            f" This is compaction #{compaction['successive_compactions']} in a row: "
            "check the synthesis entries (aihistory/journal)."
        )
    return text


# What ``aicompact`` says a compaction with each strategy will do.
COMPACTION_STEPS = {
    "summary": "journaling facts, then summarizing",
    "masking": "masking old tool outputs",
    "assistant_runs": "journaling facts, then summarizing runs of its own messages",
    "hybrid": "masking old tool outputs, then journaling facts and summarizing if needed",
}


class CmdAiCompact(MuxCommand):
    """
    Compact an assistant's context now, undo a compaction, or pin messages.

    Usage:
      aicompact [<assistant>]
      aicompact/undo [<assistant>]
      aicompact/pin <assistant> = <row id>[, <row id>...]
      aicompact/unpin <assistant> = <row id>[, <row id>...]
      aicompact/pinfact <assistant> = <fact>

    Switches:
      undo    - put back live what the last compaction replaced; refused when
                usage would then reach compact_emergency_threshold (the next
                tick would compact again) unless you add /force
      pin     - never compact or mask these messages (a tool call keeps its
                results); the row ids are those aihistory lists
      unpin   - let them be compacted again
      pinfact - add a pinned "[PINNED FACT] <fact>" message to the history

    The plain form compacts all but the last compact_preserve_window messages
    (and the pinned ones; an automatic compaction also keeps 20% of the context
    window) with the assistant's compact_strategy: summary journals the facts,
    then replaces them with one summary; masking replaces old tool outputs with
    placeholders; assistant_runs summarizes each run of its own messages;
    hybrid masks, then summarizes if usage is still over the sleep threshold.
    You are told when it is done; aihistory/archived shows what was replaced.
    Pins may hold compact_pin_max_share of the context window.

    Examples:
      aicompact helper
      aicompact/undo helper
      aicompact/pin helper = 42
      aicompact/pinfact helper = The east gate stays shut until the king returns.
    """

    key = "aicompact"
    switch_options = ("undo", "force", "pin", "unpin", "pinfact")
    locks = "cmd:perm(Builder)"
    help_category = "AI"

    def func(self):
        caller = self.caller
        action = [switch for switch in self.switches if switch != "force"]
        if len(action) > 1 or ("force" in self.switches and action != ["undo"]):
            caller.msg("Use one of /undo (with /force if need be), /pin, /unpin or /pinfact.")
            return
        action = action[0] if action else "compact"
        if (self.rhs is None) != (action in ("compact", "undo")):
            caller.msg(f"Usage: {self.usage_of(action)}")
            return
        assistant = find_assistant(caller, self.lhs.strip())
        if assistant is None:
            return
        script = assistant.assistant_script
        if action in ("compact", "undo") and self.busy(script):
            caller.msg(f"{assistant.key} is already compacting; wait until it is done.")
            return
        {
            "compact": self.compact,
            "undo": self.undo,
            "pin": self.pin,
            "unpin": self.pin,
            "pinfact": self.pin_fact,
        }[action](assistant, script)

    @staticmethod
    def usage_of(action):
        """Return the usage line of one form of the command."""
        return {
            "compact": "aicompact [<assistant>]",
            "undo": "aicompact/undo[/force] [<assistant>]",
            "pin": "aicompact/pin <assistant> = <row id>[, <row id>...]",
            "unpin": "aicompact/unpin <assistant> = <row id>[, <row id>...]",
            "pinfact": "aicompact/pinfact <assistant> = <fact>",
        }[action]

    @staticmethod
    def busy(script):
        """Return whether a compaction (or its extraction) of ``script`` is running."""
        running = script.ndb.manual_compaction
        return script.ndb.compacting or script.ndb.extracting or (running and not running.called)

    def compact(self, assistant, script):
        """Start a manual compaction; tell the caller its result when it is done."""
        caller = self.caller
        steps = COMPACTION_STEPS[compact_strategy(script.effective_config())]
        caller.msg(f"{assistant.key} starts compacting: {steps}.")

        def report(results):
            caller.msg(f"{assistant.key}: {compaction_report(*results)}")

        def failed(failure):
            logger.log_err(f"AI {script.label}: manual compaction failed: {failure.getTraceback()}")
            caller.msg(f"{assistant.key}: compaction failed: {failure.getErrorMessage()}")

        running = manual_compaction(script, assistant)
        script.ndb.manual_compaction = running
        running.addCallbacks(report, failed)

    def undo(self, assistant, script):
        """Undo the last compaction, or say why not."""
        try:
            done = undo_last_compaction(
                script, assistant, force="force" in self.switches, by=self.caller.key
            )
        except UndoRefused as err:
            hint = " Add /force to undo anyway." if err.forceable else ""
            self.msg_wrapped(f"{assistant.key}: {err}.{hint}")
            return
        record = done["record"]
        journal = [
            f"{count} synthesis {'entry' if count == 1 else 'entries'} {what}"
            for count, what in ((done["deleted"], "deleted"), (done["archived"], "archived"))
            if count
        ]
        self.msg_wrapped(
            f"{assistant.key}: undid the {record.kind} compaction #{record.id} of "
            f"{when(record.created_at.isoformat())}: {done['restored']} messages are live "
            f"again; the context holds {done['tokens']:,} of {done['max_tokens']:,} tokens "
            f"({done['usage']:.1%})." + (f" Journal: {', '.join(journal)}." if journal else "")
        )

    def pin(self, assistant, script):
        """Pin (or unpin) the messages the right-hand side names by row id."""
        pinning = "pin" in self.switches
        wanted = [part.strip() for part in self.rhs.split(",")]
        if not all(part.isdigit() for part in wanted):
            self.caller.msg(f"Usage: {self.usage_of('pin' if pinning else 'unpin')}")
            return
        wanted = [int(part) for part in wanted]
        try:
            ids = pin_messages(script, wanted, pinning)
        except PinRefused as err:
            self.msg_wrapped(f"{assistant.key}: {err}; unpin something first.")
            return
        missing = sorted(set(wanted) - set(ids))
        if missing:
            self.msg_wrapped(
                f"{assistant.key} has no live message {', '.join(map(str, missing))}; "
                f"aihistory {assistant.key} lists the row ids."
            )
        if ids:
            done = "Pinned" if pinning else "Unpinned"
            self.msg_wrapped(
                f"{done} {len(ids)} message{'' if len(ids) == 1 else 's'} of {assistant.key} ({', '.join(map(str, ids))}"
                f"{'' if set(ids) == set(wanted) else ': with their tool calls or results'}). "
                f"{pins_held(script)}"
            )

    def pin_fact(self, assistant, script):
        """Append the right-hand side to the history as a pinned fact."""
        fact = " ".join(self.rhs.split())
        if not fact:
            self.caller.msg(f"Usage: {self.usage_of('pinfact')}")
            return
        try:
            message = script.append_message(fact_message(script, fact, self.caller.key))
        except PinRefused as err:
            self.msg_wrapped(f"{assistant.key}: {err}; unpin something first.")
            return
        self.msg_wrapped(
            f"Pinned a fact for {assistant.key} as message {message['id']} "
            f"({message['token_count']} tokens). {pins_held(script)}"
        )

    def msg_wrapped(self, text):
        """Send ``text`` wrapped to the client's width."""
        self.caller.msg("\n".join(wrap(text, self.client_width())))


class CmdAiConfirm(MuxCommand):
    """
    Confirm or discard the dangerous tool calls an assistant waits on.

    Usage:
      aiconfirm [<assistant>]
      aiconfirm [<assistant>] = <number>
      aiconfirm/discard [<assistant>] = <number>

    Switches:
      discard - drop the call instead of running it

    Where a context asks for confirmation, the assistant does not run a
    dangerous tool (one that changes the world) but waits for a builder: the
    players who asked hear that a builder was asked, and the AIlog channel
    says so. The plain form lists the waiting calls, numbered. With a number,
    that call runs now: its players hear that it was done (or failed), and its
    result goes into the assistant's history; with /discard, the call is
    dropped, and the players and the assistant are told so.

    Examples:
      aiconfirm helper
      aiconfirm helper = 1
      aiconfirm/discard helper = 1
    """

    key = "aiconfirm"
    switch_options = ("discard",)
    locks = "cmd:perm(Builder)"
    help_category = "AI"

    def func(self):
        caller = self.caller
        assistant = find_assistant(caller, self.lhs.strip())
        if assistant is None:
            return
        script = assistant.assistant_script
        if self.rhs is None:
            waiting = waiting_calls(script)
            if not waiting:
                caller.msg(f"{assistant.key} waits on no dangerous tool call.")
                return
            table = EvTable("|w#|n", "|wcall|n", border="header")
            for number, call in enumerate(waiting, 1):
                table.add_row(number, tool_call_text(call))
            caller.msg(f"Tool calls {assistant.key} waits on:\n{table}")
            return
        number = self.rhs.strip()
        try:
            if "discard" in self.switches:
                call = discard_call(script, assistant, _whole(number), caller)
                caller.msg(f"Discarded {tool_call_text(call)}; {assistant.key} is told.")
                return
            running = confirm_call(script, assistant, _whole(number), caller)
        except NoSuchCall:
            caller.msg(
                f"{assistant.key} has no waiting call {number!r}; see aiconfirm {assistant.key}."
            )
            return
        running.addCallback(
            lambda ran: caller.msg(
                f"Ran {tool_call_text(ran[0])} for {assistant.key}: {ran[1].content}"
            )
        )


def _whole(text):
    """Return ``text`` as a whole number, or raise NoSuchCall (no call has another name)."""
    if not text.isdigit():
        raise NoSuchCall(text)
    return int(text)


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


def step_line(name, result):
    """Return what one step of the last sleep did, from its plain result fields."""
    if result.get("error"):
        return f"{name}: failed: {result['error']}"
    if result.get("skipped"):
        return f"{name}: skipped: {result.get('reason', '?')}"
    # Lists are counted: every id a step touched would not fit on a line.
    fields = [
        f"{key.replace('_', ' ')} {len(value) if isinstance(value, list) else value}"
        for key, value in result.items()
    ]
    return f"{name}: {', '.join(fields) or 'nothing reported'}"


class CmdAiMemory(Command):
    """
    Inspect an assistant's long-term memory: memories, journal, entity profiles.

    Usage:
      aimemory [<assistant>]
      aimemory [<assistant>]/search <words>
      aimemory [<assistant>]/show <link id>
      aimemory [<assistant>]/profiles [<name>]

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
    entity profiles, then tells when the assistant last slept and what each
    step of that sleep did. What was whispered to the assistant is marked
    "(private to #dbref)": players never hear it, builders see it.

    Examples:
      aimemory helper
      aimemory helper/search gate password
      aimemory helper/show 12
      aimemory helper/profiles Char
    """

    key = "aimemory"
    locks = "cmd:perm(Builder)"
    help_category = "AI"

    def parse(self):
        """Split ``<assistant>/<switch> <argument>``: the switch follows the name."""
        name, _, rest = self.args.strip().partition("/")
        switch, _, argument = rest.strip().partition(" ")
        self.name, self.switch, self.argument = name.strip(), switch.lower(), argument.strip()

    def func(self):
        forms = {
            "": self.overview,
            "search": self.search,
            "show": self.show,
            "profiles": self.profiles,
        }
        if self.switch not in forms:
            self.caller.msg(
                f"aimemory has no switch /{self.switch}; use /search, /show or /profiles."
            )
            return
        assistant = find_assistant(self.caller, self.name)
        if assistant is None:
            return
        text = forms[self.switch](assistant)
        if text:  # a search answers later, when its Deferred fires
            evmore.msg(self.caller, text, session=self.session)

    def wrapped(self, text, indent=INDENT):
        """Return ``text`` wrapped to the client's width, every line after the first indented.

        Leading spaces of ``text`` are kept (textwrap keeps a paragraph's): they indent its
        first line.
        """
        return "\n".join(wrap(text, self.client_width(), subsequent_indent=indent))

    def overview(self, assistant):
        """Return the counts of memories, journal entries and profiles, and the last sleep."""
        script = assistant.assistant_script
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
        memories = (
            f"Memories: {links['remembered']} ({links['remembered'] - links['superseded']} "
            f"current, {links['superseded']} superseded)"
        )
        if links["pending"]:
            memories += f"; {links['pending']} being added"
        if not script.get_config("memory_enabled"):
            memories += "; memory_enabled is False: no new ones are made"
        last = deserialize(script.db.last_sleep)  # plain lists, not the Attribute's
        lines = [
            f"Long-term memory of |w{assistant.key}|n (aimemory {assistant.key}/search, "
            "/show, /profiles look closer):",
            f"{memories}.",
            f"Journal: {entries['total']} entries, {entries['consolidated']} consolidated into "
            f"memory, {entries['total'] - entries['consolidated']} waiting for the next sleep; "
            f"{entries['archived']} archived.",
            f"Entity profiles: {observations['entities']} ({observations['total']} "
            f"observations, {observations['superseded']} superseded).",
            f"Last sleep: {when(last['at']) if last else 'never'}" + (":" if last else "."),
        ]
        lines = [self.wrapped(line) for line in lines]
        for name, result in (last or {}).get("steps", {}).items():
            lines.append(self.wrapped(INDENT + step_line(name, result), INDENT * 2))
        return "\n".join(lines)

    def search(self, assistant):
        """Search every memory for the argument; the hits are sent when Mem0 answers."""
        caller, query, width = self.caller, self.argument, self.client_width()
        if not query:
            return f"Usage: aimemory {assistant.key}/search <words>"
        caller.msg(
            self.wrapped(
                f"Searching the long-term memory of {assistant.key} for {raw(repr(query))}..."
            )
        )

        def report(hits):
            evmore.msg(caller, self.hits(assistant, query, hits, width), session=self.session)

        def failed(failure):
            logger.log_err(f"AI {assistant.key}: aimemory search failed: {failure.getTraceback()}")
            text = f"{assistant.key}: the memory search failed: {failure.getErrorMessage()}"
            # An error may run over several long lines (a configuration's validation).
            caller.msg("\n".join(self.wrapped(raw(line)) for line in text.splitlines()))

        searching = search_every_memory(assistant, query, SEARCH_LIMIT)
        caller.ndb.aimemory_search = searching  # for whoever waits on it (tests)
        searching.addCallbacks(report, failed)
        return None

    def hits(self, assistant, query, hits, width):
        """Return the memories found for ``query``: link id, score, supersession, text."""
        if not hits:
            return self.wrapped(f"{assistant.key} remembers nothing near {raw(repr(query))}.")
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
        heading = self.wrapped(
            f"Memories of |w{assistant.key}|n nearest {raw(repr(query))}, best first "
            f"(aimemory {assistant.key}/show <link> shows one in full):"
        )
        return f"{heading}\n{table}"

    def show(self, assistant):
        """Return one memory in full, with its journal entry and the messages it came from."""
        number = self.argument
        if not number:
            return f"Usage: aimemory {assistant.key}/show <link id>"
        if not number.isdigit():
            return self.wrapped(
                f"{raw(repr(number))} is not a link id: give the number /search shows."
            )
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
            self.wrapped(heading),
            *indented(link.text, self.client_width()),
            *map(self.wrapped, facts),
            *self.source(assistant, link.entry),
        ]
        return "\n".join(lines)

    def source(self, assistant, entry):
        """Return the lines telling a memory's journal entry and its history messages."""
        if entry is None:
            return [
                self.wrapped(
                    "Source entry: deleted from the journal (the next sleep drops this memory)."
                )
            ]
        score = "unscored" if entry.score is None else f"score {entry.score:g}"
        lines = [
            self.wrapped(
                f"Source entry: {entry.entry_id} ({entry.source_type}, importance "
                f"{entry.importance}, {score}, {'archived' if entry.archived else 'not archived'})."
            )
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
            lines.append(self.wrapped(f"No longer stored: {', '.join(map(str, gone))}."))
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
            return self.wrapped(f"{assistant.key} has no entity profile{about}.")
        lines = [
            self.wrapped(
                f"Entity profiles of |w{assistant.key}|n ({len(profiles)}; superseded "
                "observations indented below the current ones):"
            )
        ]
        for ref, profile in profiles.items():
            observations = profile["observations"]
            current = [obs for obs in observations if not obs.get("invalid_at")]
            lines.append(
                self.wrapped(
                    f"|w{raw(profile['name'])}|n ({ref}): {len(current)} current, "
                    f"{len(observations) - len(current)} superseded, updated "
                    f"{when(profile['updated'])}"
                )
            )
            for observation in current:
                text = privately(observation["text"], observation.get("audience"))
                lines.append(self.wrapped(INDENT + raw(text), INDENT * 2))
            for observation in observations:
                if observation.get("invalid_at"):
                    text = privately(observation["text"], observation.get("audience"))
                    replaced = (
                        f"(superseded {when(observation['invalid_at'])} by: "
                        f"{observation.get('superseded_by') or 'one since deleted'})"
                    )
                    lines.append(self.wrapped(INDENT * 2 + raw(f"{replaced} {text}"), INDENT * 3))
        return "\n".join(lines)


class AssistantCmdSet(CmdSet):
    """The assistant's commands: talk for everyone, the ai* commands for builders."""

    key = "AssistantCmdSet"

    def at_cmdset_creation(self):
        self.add(CmdTalk())
        self.add(CmdAiMode())
        self.add(CmdAiConfig())
        self.add(CmdAiHistory())
        self.add(CmdAiCompact())
        self.add(CmdAiConfirm())
        self.add(CmdAiMemory())
