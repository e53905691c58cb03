"""The builders' hand on compaction: compacting now, undoing the last one, pinning messages."""

from evennia.utils import logger
from twisted.internet import defer

from ..config import compact_strategy
from ..pins import PinRefused, fact_message, pin_messages
from ..sleep.compaction import ACCURACY_WARNING_AT, compact_conversation_history
from ..sleep.extraction import ExtractionBeforeSummary
from ..sleep.undo import UndoRefused, undo_last_compaction
from ..utils.message_format import summary_depth
from ..utils.wording import plural
from .common import AssistantCommand, find_assistant, pins_held, when


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


def compaction_running(script):
    """Return whether a compaction (or its extraction) of ``script`` is running."""
    running = script.ndb.manual_compaction
    return script.ndb.compacting or script.ndb.extracting or (running and not running.called)


def compaction_report(extraction, compaction):
    """Return one line telling a builder what a manual compaction did."""
    note = extraction.get("reason") or (
        None if extraction["success"] else f"extraction stopped: {extraction['stop_reason']}"
    )
    facts = f"{plural(extraction['facts_recorded'], 'fact')} journaled"
    facts += f" ({note})" if note else ""
    masked = compaction.get("masking") or {}
    if masked.get("success"):  # a hybrid compaction masked, then summarized
        facts += f"; masked {plural(masked['compacted_messages'], 'old tool output')}"
    if compaction.get("skipped"):
        hint = f" ({compaction['hint']})" if compaction.get("hint") else ""
        return f"{facts}; compaction skipped: {compaction['reason']}{hint}."
    if not compaction["success"]:
        return f"{facts}; compaction failed: {compaction['error']}."
    what = "old tool output" if "placeholder_ids" in compaction else "message"
    text = (
        f"{facts}; compacted {plural(compaction['compacted_messages'], what)}: "
        f"{compaction['original_tokens']} → {compaction['new_tokens']} tokens "
        f"({compaction['reduction_pct']:.0f}% less)."
    )
    summary = compaction.get("summary")
    if summary:  # a hybrid compaction masked, and its summary did not follow
        text += f" No summary: {summary.get('error') or summary.get('reason')}."
    if compaction.get("successive_compactions", 0) >= ACCURACY_WARNING_AT:
        text += (
            f" Its summary is {summary_depth(compaction['successive_compactions'])}: "
            "check the synthesis entries (aihistory/journal)."
        )
    return text


def undo_report(assistant, done):
    """Return what an undo did (``undo_last_compaction``'s result ``done``), in one line."""
    record = done["record"]
    journal = [
        f"{plural(count, 'synthesis entry', 'synthesis entries')} {what}"
        for count, what in ((done["deleted"], "deleted"), (done["archived"], "archived"))
        if count
    ]
    return (
        f"{assistant.key}: undid the {record.kind} compaction #{record.id} of "
        f"{when(record.created_at.isoformat())}: {plural(done['restored'], 'message')} "
        f"{'is' if done['restored'] == 1 else 'are'} live again; the context holds "
        f"{done['tokens']:,} of {done['max_tokens']:,} tokens "
        f"({done['usage']:.1%})." + (f" Journal: {', '.join(journal)}." if journal else "")
    )


def pin_report(assistant, wanted, ids, changed, pinning):
    """Return what a pin (or unpin) changed, and which messages were so already."""
    done, state = ("Pinned", "pinned") if pinning else ("Unpinned", "unpinned")
    already = [message_id for message_id in ids if message_id not in changed]
    were = (
        f"{'message' if len(already) == 1 else 'messages'} {', '.join(map(str, already))} "
        f"{'was' if len(already) == 1 else 'were'} {state} already"
    )
    if not changed:
        return f"Nothing changed: {assistant.key}'s {were}."
    units = "" if set(changed) <= set(wanted) else ": with their tool calls or results"
    text = (
        f"{done} {plural(len(changed), 'message')} of {assistant.key} "
        f"({', '.join(map(str, changed))}{units})."
    )
    return f"{text} {were[0].upper()}{were[1:]}." if already else text


# What ``aicompact`` says a compaction with each strategy will do.
COMPACTION_STEPS = {
    "summary": "journaling facts, then summarizing",
    "masking": "masking old tool outputs",
    "assistant_runs": "journaling facts, then summarizing runs of its own messages",
    "hybrid": "masking old tool outputs, then journaling facts and summarizing if needed",
}


class CmdAiCompact(AssistantCommand):
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
    combines_switches = True  # /undo/force
    locks = "cmd:perm(Builder)"
    help_category = "AI"

    def func(self):
        action = [switch for switch in self.switches if switch != "force"]
        if len(action) > 1 or ("force" in self.switches and action != ["undo"]):
            self.tell("Use one of /undo (with /force if need be), /pin, /unpin or /pinfact.")
            return
        action = action[0] if action else "compact"
        if (self.rhs is None) != (action in ("compact", "undo")):
            self.tell(f"Usage: {self.usage_of(action)}")
            return
        assistant = find_assistant(self.caller, self.lhs.strip())
        if assistant is None:
            return
        script = assistant.assistant_script
        if action in ("compact", "undo") and compaction_running(script):
            self.tell(f"{assistant.key} is already compacting; wait until it is done.")
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

    def compact(self, assistant, script):
        """Start a manual compaction; tell the caller its result when it is done."""
        steps = COMPACTION_STEPS[compact_strategy(script.effective_config())]
        self.tell(f"{assistant.key} starts compacting: {steps}.")

        def report(results):
            self.tell(f"{assistant.key}: {compaction_report(*results)}")

        def failed(failure):
            logger.log_err(f"AI {script.label}: manual compaction failed: {failure.getTraceback()}")
            self.tell(f"{assistant.key}: compaction failed: {failure.getErrorMessage()}")

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
            self.tell(f"{assistant.key}: {err}.{hint}")
            return
        self.tell(undo_report(assistant, done))

    def pin(self, assistant, script):
        """Pin (or unpin) the messages the right-hand side names by row id."""
        pinning = "pin" in self.switches
        wanted = [part.strip() for part in self.rhs.split(",")]
        if not all(part.isdigit() for part in wanted):
            self.tell(f"Usage: {self.usage_of('pin' if pinning else 'unpin')}")
            return
        wanted = [int(part) for part in wanted]
        try:
            ids, changed = pin_messages(script, wanted, pinning)
        except PinRefused as err:
            self.tell(f"{assistant.key}: {err}; unpin something first.")
            return
        missing = sorted(set(wanted) - set(ids))
        if missing:
            self.tell(
                f"{assistant.key} has no live message {', '.join(map(str, missing))}; "
                f"aihistory {assistant.key} lists the row ids."
            )
        if ids:
            report = pin_report(assistant, wanted, ids, changed, pinning)
            self.tell(f"{report} {pins_held(script)}")

    def pin_fact(self, assistant, script):
        """Append the right-hand side to the history as a pinned fact."""
        fact = " ".join(self.rhs.split())
        if not fact:
            self.tell(f"Usage: {self.usage_of('pinfact')}")
            return
        try:
            message = script.append_message(fact_message(script, fact, self.caller.key))
        except PinRefused as err:
            self.tell(f"{assistant.key}: {err}; unpin something first.")
            return
        self.tell(
            f"Pinned a fact for {assistant.key} as message {message['id']} "
            f"({message['token_count']} tokens). {pins_held(script)}"
        )
