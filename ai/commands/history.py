"""The builders' view of an assistant's context: usage, live history, journal, compactions."""

from evennia.utils.ansi import raw
from evennia.utils.evtable import EvTable

from ..audience import describe_audience, message_audience
from ..config import ConfigError
from ..helpers.call_log import recent_runs
from ..helpers.journal import journal_entries
from ..history import row_to_message
from ..llm_interaction import call_options, resolve_model
from ..models import CompactionRecord, ConversationMessage
from ..sleep.compaction import ACCURACY_WARNING_AT
from ..tool_offering import tool_offering
from ..utils.markers import SUB_AGENT_KEY
from ..utils.message_format import is_summary, summary_depth, summary_text
from ..utils.wording import percent, percent_against, plural
from .common import (
    AssistantCommand,
    find_assistant,
    fitted_table,
    indented,
    pins_held,
    preview,
    row_state,
    when,
)


def summary_block(message):
    """Return a summary message's metadata on one line, then its whole text."""
    metadata = message["metadata"]
    text = summary_text(message["content"])
    audience = message_audience(message)
    private = f"{describe_audience(audience)}, " if audience else ""
    return (
        f"|wSummary {message['id']}|n ({metadata.get('kind', '?')}, {private}"
        f"{summary_depth(metadata.get('successive_compactions', 1))}, "
        f"{when(metadata.get('compacted_at'))}): replaced "
        f"{plural(metadata.get('compacted_count'), 'message')}, "
        f"{metadata.get('original_token_count', '?')} → "
        f"{metadata.get('summary_token_count', '?')} tokens:\n{text}"
    )


# Model runs the plain form lists; aihistory/calls lists every kept one.
RUNS_SHOWN = 5


def message_table(messages, width):
    """Return an EvTable of history messages within ``width``: row id, role, the context
    of the model call that wrote it (none for an event or a summary), tokens, preview."""
    rows = [
        (str(msg["id"]), msg["role"], msg["metadata"].get("context", ""), str(msg["token_count"]))
        for msg in messages
    ]
    previews = [preview(message, width) for message in messages]
    return fitted_table(("row id", "role", "context", "tokens", "preview"), rows, previews, width)


def run_line(run):
    """Return one model run: when, its context, its calls, why it stopped, its audience."""
    audience = f", {describe_audience(run['audience'])}" if run.get("audience") else ""
    return (
        f"{when(run['at'])} {run['context']}: {plural(run['calls'], 'call')}, "
        f"{run['stop_reason'] or 'done'}{audience}"
    )


def sub_agent_runs(script):
    """Return the archived messages of ``script``'s sub-agents, by the result row they are
    archived under: ``[(result row id, messages), ...]``, oldest first."""
    rows = ConversationMessage.objects.filter(
        db_script_id=script.id, is_live=False, metadata__has_key=SUB_AGENT_KEY
    ).order_by("id")
    runs = {}
    for row in rows:
        runs.setdefault(row.replaced_by_id, []).append(row_to_message(row))
    return list(runs.items())


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


def last_compaction_line(script):
    """Return when the compaction in effect ran, and which newer one was undone, if any."""
    text = f"Last compaction: {when(script.db.last_compaction)}"
    newest = CompactionRecord.objects.filter(db_script_id=script.id).last()
    if newest and newest.undone_at:
        text += (
            f" (#{newest.id} of {when(newest.created_at.isoformat())} was undone "
            f"{when(newest.undone_at.isoformat())})"
        )
    return f"{text}."


def record_line(record):
    """Return one compaction record: its kind, strategy, time, figures and whether undone."""
    result = record.result or {}
    figures = (
        f"{plural(result.get('compacted_messages'), 'message')}, "
        f"{result.get('original_tokens', '?')} → {result.get('new_tokens', '?')} tokens"
    )
    state = f"undone {when(record.undone_at.isoformat())}" if record.undone_at else "in effect"
    return (
        f"#{record.id} {record.kind} {record.strategy}, {when(record.created_at.isoformat())}: "
        f"{figures}; {state}"
    )


class CmdAiHistory(AssistantCommand):
    """
    Inspect an assistant's context: usage, live history, journal and compactions.

    Usage:
      aihistory [<assistant>]
      aihistory/journal [<assistant>]
      aihistory/compactions [<assistant>]
      aihistory/archived [<assistant>] <row id>
      aihistory/pins [<assistant>]
      aihistory/calls [<assistant>]
      aihistory/subagents [<assistant>]

    Switches:
      journal     - the journal's entries in full, newest last (syntheses too;
                    an insight of a reflection with the entries it cites)
      compactions - every compaction (kind, strategy, figures, undone or not),
                    every summary, live or archived, and the syntheses
      archived    - one summary (or masked tool output) in full, then the
                    messages it replaced
      pins        - the pinned messages, and how much of their cap they hold
      calls       - the last model runs: when, the context each ran in
                    (tick_event, reflection, pre_compaction...), its calls
                    and why it stopped
      subagents   - what each sub-agent (a delegate call) said and did, archived
                    under the result its turn read back: never in a prompt

    Without a name, the only assistant in the room is shown. The plain form shows
    how full the context is against the compaction thresholds, how tools are
    offered to the model (natively or listed as text, and who chose), each live
    summary in full with its metadata, the journal's synthesis entries, then the
    live history, oldest first: each message's row id (the one aicompact/pin and
    aihistory/archived take), role, the context of the model call that wrote it,
    tokens and a preview, then the last model runs; in it, summaries read
    "[CONTEXT SUMMARY] n msgs, kind, depth k", a masked tool output reads
    "[masked <tool>, n tokens, <when it was archived>]", and a pinned message
    starts with "[pinned]". What was whispered to the assistant (and its
    answer) is marked "(private to <name> (#dbref))": players never see it,
    builders do.

    Examples:
      aihistory
      aihistory/compactions helper
      aihistory/archived helper 42
      aihistory/pins helper
      aihistory/subagents helper
    """

    key = "aihistory"
    switch_options = ("journal", "compactions", "archived", "pins", "calls", "subagents")
    locks = "cmd:perm(Builder)"
    help_category = "AI"

    def func(self):
        name = self.args.strip()
        if "archived" in self.switches:
            name, _, summary_id = name.rpartition(" ")
            if not summary_id.isdigit():
                self.tell("Usage: aihistory/archived [<assistant>] <row id>")
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
        elif "calls" in self.switches:
            text = self.calls(assistant, script)
        elif "subagents" in self.switches:
            text = self.sub_agents(assistant, script)
        else:
            text = self.overview(assistant, script)
        self.page(text)

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
            thresholds.append(f"{label} {percent(threshold)} ({state})")
        shown = percent_against(
            usage.usage, config["compact_sleep_threshold"], config["compact_emergency_threshold"]
        )
        messages = script.history.messages()
        lines = [
            f"|w{assistant.key}|n context: {usage.total_tokens}/{usage.max_tokens} tokens "
            f"({shown}); thresholds: {', '.join(thresholds)}",
            f"History: {usage.history_tokens} tokens ({usage.history_usage:.1%}) in "
            f"{plural(usage.message_count, 'message')}. Model: {script.history.model}. "
            + last_compaction_line(script),
            tools_offered(script),
        ]
        for message in messages:
            successive = message["metadata"].get("successive_compactions") or 0
            if is_summary(message) and successive >= ACCURACY_WARNING_AT:
                lines.append(
                    f"|rWarning:|n summary {message['id']} is {summary_depth(successive)}; "
                    "accuracy degrades with each summary of a summary. Check the journal's "
                    "synthesis entries (aihistory/journal)."
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
        runs = recent_runs(script)[-RUNS_SHOWN:]
        if runs:
            lines.append("Last model runs (aihistory/calls shows more):")
            lines += [run_line(run) for run in runs]
        return "\n".join(lines)

    def calls(self, assistant, script):
        """Return the kept model runs, oldest first, with the context each ran in."""
        runs = recent_runs(script)
        if not runs:
            return f"{assistant.key} has made no model call since its runs were kept."
        lines = [f"Model runs of |w{assistant.key}|n (oldest first):"]
        return "\n".join(lines + [run_line(run) for run in runs])

    def sub_agents(self, assistant, script):
        """Return what each sub-agent said, under the row of the result its turn read."""
        runs = sub_agent_runs(script)
        if not runs:
            return f"{assistant.key}'s sub-agents have left nothing: none ran."
        lines = [f"Sub-agents of |w{assistant.key}|n (oldest first; never sent to the model):"]
        for result_id, messages in runs:
            run = messages[0]["metadata"][SUB_AGENT_KEY]
            audience = message_audience(messages[0])
            private = f", {describe_audience(audience)}" if audience else ""
            lines.append(
                f"|wSub-agent|n under row {result_id}{private}: "
                f"{plural(run.get('calls'), 'call')}, {run.get('stop_reason') or 'done'}; "
                f"task: {raw(run.get('task', ''))}"
            )
            lines.append(str(message_table(messages, self.client_width())))
        return "\n".join(lines)

    def journal(self, assistant):
        """Return the journal's entries, oldest first, each in full."""
        entries = journal_entries(assistant)
        if not entries:
            return f"{assistant.key}'s journal is empty."
        count = plural(len(entries), "entry", "entries")
        blocks = [f"Journal of |w{assistant.key}|n ({count}, newest last):"]
        for entry in entries:
            about = [f"importance {entry.get('importance', '?')}", entry.get("source_type", "?")]
            if entry.get("cites"):
                about.append("cites " + ", ".join(entry["cites"]))
            if entry.get("audience"):
                about.append(describe_audience(entry["audience"]))
            if entry.get("tags"):
                about.append("tags: " + ", ".join(entry["tags"]))
            blocks.append(raw(f"{entry['id']} ({'; '.join(about)})"))
            blocks += indented(entry["content"], self.client_width())
        return "\n".join(blocks)

    def compactions(self, assistant, script):
        """Return every compaction record, every summary with its metadata, and the
        synthesis entries' ids."""
        records = CompactionRecord.objects.filter(db_script_id=script.id)
        summaries = summaries_of(script)
        if not (records or summaries):
            return f"{assistant.key} has never compacted its context."
        lines = [f"Compactions of |w{assistant.key}|n (oldest first):"]
        lines += [record_line(record) for record in records]
        in_effect = [record for record in records if not record.undone_at]
        if in_effect:
            lines.append(f"aicompact/undo {assistant.key} undoes #{in_effect[-1].id}.")
        unrecorded = [str(row.pk) for row in summaries if row.made_by_id is None]
        if unrecorded:
            lines.append(
                f"Made before compactions were recorded (no undo): summary {', '.join(unrecorded)}."
            )
        if summaries:
            table = self.summary_table(summaries, self.client_width())
            lines += ["Summaries (oldest first):", str(table)]
        syntheses = [entry["id"] for entry in journal_entries(assistant, "compaction")]
        lines.append(f"Synthesis entries in the journal: {', '.join(syntheses) or 'none'}.")
        return "\n".join(lines)

    @staticmethod
    def summary_table(summaries, width):
        """Return an EvTable of summary rows within ``width``: id, state, kind, time (to the
        minute), messages, tokens and its depth (#: 2 for a summary of a summary)."""
        table = EvTable(
            "|wid|n",
            "|wstate|n",
            "|wkind|n",
            "|wcompacted at|n",
            "|wmsgs|n",
            "|wtokens|n",
            "|w#|n",
            border="header",
            maxwidth=width,
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
            return f"{assistant.key} has no pinned messages. {held}"
        heading = f"Pinned messages of |w{assistant.key}|n ({len(pinned)}, oldest first):"
        table = message_table(pinned, self.client_width())
        return "\n".join([heading, str(table), held])
