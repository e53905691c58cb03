"""In-game commands of the assistant, and the command set that carries them.

Add ``AssistantCmdSet`` to your ``CharacterCmdSet`` (see the README).
"""

from ast import literal_eval

from evennia.commands.cmdset import CmdSet
from evennia.commands.default.muxcommand import MuxCommand
from evennia.utils.evtable import EvTable
from evennia.utils.utils import inherits_from

from .config import SCRIPT_CONFIG, ConfigError

ASSISTANT_TYPECLASS = "ai.assistant_character.AssistantCharacter"


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
    player speaks to it.

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


class CmdAiConfig(MuxCommand):
    """
    Show or change an assistant's configuration.

    Usage:
      aiconfig <assistant>
      aiconfig <assistant>/<attribute> = <value>

    Values are Python literals (0.75, 30, True, None, 'openai/gpt-4o-mini').
    A value out of range is refused with the allowed range, and nothing changes.

    Examples:
      aiconfig helper
      aiconfig helper/compact_sleep_threshold = 0.6
      aiconfig helper/llm_model = 'openai/gpt-4o-mini'
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
        if attribute:
            attribute = attribute.strip()
            if self.rhs is None:
                self.caller.msg("Usage: aiconfig <assistant>/<attribute> = <value>")
                return
            try:
                value = literal_eval(self.rhs.strip())
            except (ValueError, SyntaxError):
                self.caller.msg(f"'{self.rhs.strip()}' is not a Python literal; quote strings.")
                return
            try:
                script.set_config(attribute, value)
            except ConfigError as err:
                self.caller.msg(f"Refused: {err}")
                return
            self.caller.msg(f"{assistant.key}: {attribute} = {value!r}")
            return
        config = script.effective_config()
        table = EvTable("|wattribute|n", "|wvalue|n", "|wmeaning|n", border="cells")
        for key, option in SCRIPT_CONFIG.items():
            table.add_row(key, repr(config[key]), option.description)
        self.caller.msg(f"Configuration of {assistant.key}:\n{table}")


class AssistantCmdSet(CmdSet):
    """The assistant's commands: talk for everyone, aimode and aiconfig for builders."""

    key = "AssistantCmdSet"

    def at_cmdset_creation(self):
        self.add(CmdTalk())
        self.add(CmdAiMode())
        self.add(CmdAiConfig())
