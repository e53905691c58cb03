"""In-game commands of the assistant, one module per family, and the command set that
carries them.

Add ``AssistantCmdSet`` to your ``CharacterCmdSet`` (see the README).
"""

from evennia.commands.cmdset import CmdSet

from .compaction import COMPACTION_STEPS, CmdAiCompact
from .configuration import CmdAiConfig, CmdAiMode
from .confirmation import CmdAiConfirm
from .goals import CmdAiGoal
from .history import CmdAiHistory
from .memory import CmdAiMemory
from .talk import CmdTalk
from .task import CmdAiTask

__all__ = [
    "AssistantCmdSet",
    "COMPACTION_STEPS",
    "CmdAiCompact",
    "CmdAiConfig",
    "CmdAiConfirm",
    "CmdAiGoal",
    "CmdAiHistory",
    "CmdAiMemory",
    "CmdAiMode",
    "CmdAiTask",
    "CmdTalk",
]


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
        self.add(CmdAiTask())
        self.add(CmdAiGoal())
