"""The builders' request: a task for an assistant, worked on in several steps."""

from ..utils.wording import plural
from .common import AssistantCommand, find_assistant

# A request is a task, not a document: longer would crowd the prompt of every step.
MAX_REQUEST_CHARS = 2000


class CmdAiTask(AssistantCommand):
    """
    Ask an AI assistant to do something.

    Usage:
      aitask <assistant> = <request>

    The assistant takes the request on its next tick and may work on it in
    several steps (looking around, noting things, answering), up to its
    iteration limit. A request changes the world, so a dangerous tool it
    calls (such as give) waits for aiconfirm. What it says is heard in its
    room; aihistory shows the turn.

    Examples:
      aitask helper = Greet everyone here and note who they are.
      aitask helper = Give the <item> you carry to <name>.
    """

    key = "aitask"
    locks = "cmd:perm(Builder)"
    help_category = "AI"

    def func(self):
        request = (self.rhs or "").strip()
        if not self.lhs.strip() or not request:
            self.tell("Usage: aitask <assistant> = <request>")
            return
        if len(request) > MAX_REQUEST_CHARS:
            self.tell(
                f"The request is {plural(len(request), 'character')}; at most "
                f"{MAX_REQUEST_CHARS:,} are taken. Nothing was sent."
            )
            return
        assistant = find_assistant(self.caller, self.lhs.strip())
        if assistant is None:
            return
        assistant.request(self.caller, request)
        self.tell(f"You ask {assistant.key}: {request}")
