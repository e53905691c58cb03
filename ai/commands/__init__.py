"""In-game commands of the assistant, and the command set that carries them.

Add ``AssistantCmdSet`` to your ``CharacterCmdSet`` (see the README).
"""

from .memory import (
    COMPACTION_STEPS,
    AssistantCmdSet,
    CmdAiCompact,
    CmdAiConfig,
    CmdAiConfirm,
    CmdAiHistory,
    CmdAiMemory,
    CmdAiMode,
    CmdTalk,
)

__all__ = [
    "AssistantCmdSet",
    "COMPACTION_STEPS",
    "CmdAiCompact",
    "CmdAiConfig",
    "CmdAiConfirm",
    "CmdAiHistory",
    "CmdAiMemory",
    "CmdAiMode",
    "CmdTalk",
]
