"""The players' command: talking to an assistant."""

from ..tools.communication import tell_room
from .common import AssistantCommand, find_assistant


class CmdTalk(AssistantCommand):
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
            self.tell("Usage: talk <assistant> = <message>")
            return
        name, message = (self.lhs, self.rhs) if self.rhs else ("", self.args.strip())
        assistant = find_assistant(caller, name.strip())
        if assistant is None:
            return
        if assistant.location != caller.location:
            self.tell(f"{assistant.key} is not here.")
            return
        tell_room(
            caller.location,
            f'{caller.key} says to {assistant.key}, "{message}"',
            exclude=[caller, assistant],
        )
        caller.msg(f'You say to {assistant.key}, "{message}"')
        assistant.hear(caller, message, event_type="talk")
