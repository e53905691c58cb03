"""The builders' answer to the dangerous tool calls an assistant waits on."""

from evennia.utils.evtable import EvTable

from ..confirmation import NoSuchCall, confirm_call, discard_call, waiting_calls
from ..utils.message_format import tool_call_text
from .common import AssistantCommand, find_assistant


class CmdAiConfirm(AssistantCommand):
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
        assistant = find_assistant(self.caller, self.lhs.strip())
        if assistant is None:
            return
        script = assistant.assistant_script
        if self.rhs is None:
            waiting = waiting_calls(script)
            if not waiting:
                self.tell(f"{assistant.key} waits on no dangerous tool call.")
                return
            # The calls in full, wrapped in their column: a builder allows what they read.
            table = EvTable("|w#|n", "|wcall|n", border="header", maxwidth=self.client_width())
            for number, call in enumerate(waiting, 1):
                table.add_row(number, tool_call_text(call))
            self.tell(f"Tool calls {assistant.key} waits on:\n{table}")
            return
        number = self.rhs.strip()
        try:
            if "discard" in self.switches:
                call = discard_call(script, assistant, _whole(number), self.caller)
                self.tell(f"Discarded {tool_call_text(call)}; {assistant.key} is told.")
                return
            running = confirm_call(script, assistant, _whole(number), self.caller)
        except NoSuchCall:
            self.tell(
                f"{assistant.key} has no waiting call {number!r}; see aiconfirm {assistant.key}."
            )
            return
        running.addCallback(
            lambda ran: self.tell(
                f"Ran {tool_call_text(ran[0])} for {assistant.key}: {ran[1].content}"
            )
        )


def _whole(text):
    """Return ``text`` as a whole number, or raise NoSuchCall (no call has another name)."""
    if not text.isdigit():
        raise NoSuchCall(text)
    return int(text)
