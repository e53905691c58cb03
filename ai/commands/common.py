"""What the assistant's commands share: their switch handling, sending text within the
client's width, finding an assistant, and showing history in a table."""

from evennia.commands.command import InterruptCommand
from evennia.commands.default.muxcommand import MuxCommand
from evennia.utils import evmore
from evennia.utils.ansi import raw
from evennia.utils.evtable import EvTable
from evennia.utils.utils import inherits_from

from ..audience import describe_audience, message_audience
from ..pins import pin_cap, pinned_tokens
from ..utils.columns import INDENT, fitted
from ..utils.markers import SUMMARY_MARKER
from ..utils.message_format import is_summary, tool_call_text

ASSISTANT_TYPECLASS = "ai.assistant_character.AssistantCharacter"
# The metadata type of a tool output that compaction masked (a placeholder in its place).
MASKED = "masked"
PINNED_MARK = "[pinned]"


class AssistantCommand(MuxCommand):
    """A command of the assistant, in Evennia's form ``cmd/switch args``, that refuses a switch
    it does not know.

    Evennia's ``MuxCommand`` drops an unknown switch with a note and runs the command anyway
    (``aicompact/udno`` compacted); here an unknown switch, an ambiguous one or more
    switches than the command takes stop it before it does anything, naming the switch and
    listing those it has. A switch may be cut to a prefix only it starts with, as in Evennia.
    """

    switch_options = ()
    # Whether switches may be given together (the command then checks which may).
    combines_switches = False

    def parse(self):
        """Parse as ``MuxCommand`` does, then refuse what ``switch_options`` does not allow."""
        options = self.switch_options
        self.switch_options = None  # Evennia's check would drop an unknown switch and go on.
        try:
            super().parse()
        finally:
            self.switch_options = options
        self.switches = [self.known_switch(switch) for switch in self.switches]
        if len(self.switches) > 1 and not self.combines_switches:
            given = "/".join(self.switches)
            self.refuse(f"{self.key} takes one switch at a time, not /{given}.")

    def known_switch(self, given):
        """Return the switch ``given`` names, in full; refuse one the command does not know."""
        given = given.strip().lower()
        matches = [option for option in self.switch_options if option == given] or [
            option for option in self.switch_options if given and option.startswith(given)
        ]
        if len(matches) == 1:
            return matches[0]
        if matches:
            either = " or ".join(f"/{option}" for option in matches)
            self.refuse(f"{self.key}: /{given} could be {either}; type more of it.")
        if not self.switch_options:
            self.refuse(f"{self.key} has no switch /{given}: it takes none (see help {self.key}).")
        self.refuse(f"{self.key} has no switch /{given}. Its switches: {self.switch_list()}.")

    def switch_list(self):
        """Return the command's switches as ``/one, /two``."""
        return ", ".join(f"/{option}" for option in self.switch_options)

    def refuse(self, text):
        """Tell the caller ``text`` and stop the command."""
        self.tell(text)
        raise InterruptCommand

    def tell(self, text):
        """Send ``text`` to the caller, every line wider than the client wrapped (a message
        is a paragraph: its wrapped lines start at the margin)."""
        self.caller.msg(fitted(text, self.client_width()))

    def page(self, text):
        """Send ``text`` to the caller through Evennia's pager, every line wider than the
        client wrapped, its further lines indented (a listing's items stay apart)."""
        evmore.msg(self.caller, fitted(text, self.client_width(), INDENT), session=self.session)


def find_assistant(caller, name):
    """Find one assistant by name (in the room first, then anywhere) or tell the caller why not,
    naming the assistants that could be meant and how to pick one.

    Returns:
        AssistantCharacter or None.
    """
    here = caller.location.contents if caller.location else []
    here = [obj for obj in here if inherits_from(obj, ASSISTANT_TYPECLASS)]
    found = here
    if name:
        found = caller.search(name, global_search=True, typeclass=ASSISTANT_TYPECLASS, quiet=True)
    if len(found) == 1:
        return found[0]
    builder = caller.locks.check_lockstring(caller, "_:perm(Builder)")
    pick = "name one exactly, or give its #dbref" if builder else "name one exactly"
    given = raw(repr(name))
    if found and name:
        text = f"Which assistant? {given} could be {listed(found, caller, builder, 'or')}"
    elif found:
        text = f"Which assistant? {listed(found, caller, builder, 'and')} are here"
    elif name:
        text = f"No assistant is called {given}"
        text += f"; here: {listed(here, caller, builder, 'and')}" if here else ""
    else:
        text = "No assistant is here"
    caller.msg(fitted(f"{text}: {pick}."))
    return None


def listed(assistants, caller, builder, last):
    """Return assistants as ``A, B and C``: their names, with dbrefs and places for builders."""

    def named(assistant):
        if not builder:
            return assistant.key
        where = assistant.location
        away = "" if where == caller.location else f", in {where.key if where else 'no room'}"
        return f"{assistant.key} ({assistant.dbref}{away})"

    names = [named(assistant) for assistant in assistants]
    return f"{', '.join(names[:-1])} {last} {names[-1]}" if len(names) > 1 else names[0]


def shortened(text, width):
    """Return ``text`` cut to ``width`` characters, ending with … when it was cut."""
    return text if len(text) <= width else text[: width - 1] + "…"


def indented(text, width):
    """Return the lines of ``text`` as typed (uncoloured), each wrapped, all indented."""
    return fitted("\n".join(INDENT + raw(line) for line in text.splitlines()), width).split("\n")


def privately(text, audience):
    """Return ``text`` marked ``(private to #N)`` when ``audience`` is private."""
    return f"({describe_audience(audience)}) {text}" if audience else text


def preview(message, width):
    """Return one line of at most ``width`` characters that stands for ``message``."""
    metadata = message.get("metadata") or {}
    if is_summary(message):
        text = (
            f"{SUMMARY_MARKER} {metadata.get('compacted_count', '?')} msgs, "
            f"{metadata.get('kind', '?')}, depth {metadata.get('successive_compactions', 1)}"
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
    # Cells too wide to leave the text any room are wrapped within the width by EvTable.
    table = EvTable(*(f"|w{header}|n" for header in headers), border="header", maxwidth=width)
    for row, text in zip(rows, texts):
        table.add_row(*row, shortened(" ".join(text.split()), room))
    return table


def row_state(row):
    """Return whether a history row is ``live`` or archived, and in which summary."""
    if row.is_live:
        return "live"
    return f"archived in {row.replaced_by_id}" if row.replaced_by_id else "archived"


def pins_held(script):
    """Return how much of the pin cap the pinned messages of ``script`` hold, as a sentence."""
    cap, source = pin_cap(script)
    return f"Pins hold {pinned_tokens(script):,} of {cap:,} tokens ({source})."
