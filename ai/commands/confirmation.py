"""The builders' answer to the dangerous tool calls an assistant waits on."""

from evennia.utils.dbserialize import deserialize
from evennia.utils.evtable import EvTable

from ..audience import with_audience
from ..prompt_contexts import CONTEXT_TICK_EVENT
from ..tools import ToolContext, execute_tool
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
    dangerous tool (one that changes the world) but waits for a builder. The
    plain form lists the waiting calls, numbered. With a number, that call runs
    now, and its result goes into the assistant's history so it knows; with
    /discard, the call is dropped and the assistant is told so.

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
        waiting = list(script.db.awaiting_confirmation or [])
        if self.rhs is None:
            if not waiting:
                caller.msg(f"{assistant.key} waits on no dangerous tool call.")
                return
            table = EvTable("|w#|n", "|wcall|n", border="header")
            for number, call in enumerate(waiting, 1):
                table.add_row(number, tool_call_text(call))
            caller.msg(f"Tool calls {assistant.key} waits on:\n{table}")
            return
        number = self.rhs.strip()
        if not number.isdigit() or not 1 <= int(number) <= len(waiting):
            caller.msg(
                f"{assistant.key} has no waiting call {number!r}; see aiconfirm {assistant.key}."
            )
            return
        call = deserialize(waiting.pop(int(number) - 1))
        audience = call.pop("audience", None)
        script.db.awaiting_confirmation = waiting
        text = tool_call_text(call)
        if "discard" in self.switches:
            note = f"{caller.key} did not allow your call {text}; it was not run."
            caller.msg(f"Discarded {text}; {assistant.key} is told.")
        else:
            context = ToolContext(script, assistant, CONTEXT_TICK_EVENT, audience=audience)
            outcome = execute_tool(call, context)
            note = f"{caller.key} allowed your call {text}; it returned: {outcome.content}"
            caller.msg(f"Ran {text} for {assistant.key}: {outcome.content}")
        script.append_message(
            {"role": "user", "content": note, "metadata": with_audience({}, audience)}
        )
