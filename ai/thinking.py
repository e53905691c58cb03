"""The room sees that the assistant is thinking while a slow model call runs.

A local model on a CPU can take a minute to answer; players would otherwise see nothing.
The emote is shown at most once per turn, and only when a call outlasts ``thinking_delay``.
"""

from evennia.utils import logger
from twisted.internet import reactor

from .config import EMOTE_FIELD
from .tools.communication import emote


class ThinkingEmote:
    """Shows the assistant's ``thinking_emote`` once when one of its calls runs long.

    Args:
        script (AssistantScript): The assistant's script (its ``thinking_*`` attributes).
        character (AssistantCharacter): The assistant, whose room sees the emote.
        audience (list, optional): The dbrefs of a private turn's listeners, who alone see
            it; the room by default.
    """

    def __init__(self, script, character, audience=None):
        self.character = character
        self.audience = audience
        self.emote = script.get_config("thinking_emote")
        self.delay = script.get_config("thinking_delay")
        self.shown = False

    def watch(self, calling):
        """Show the emote if the Deferred ``calling`` has not fired within the delay."""
        if self.shown or not self.emote or self.character.location is None:
            return
        timer = reactor.callLater(self.delay, self._show)
        calling.addBoth(self._cancel, timer)

    def _show(self):
        self.shown = True
        text = self.emote.replace(EMOTE_FIELD, self.character.key)
        try:
            emote(self.character, text, self.audience)
        except Exception:
            logger.log_trace(f"AI {self.character.key}({self.character.dbref}): the emote failed")

    @staticmethod
    def _cancel(result, timer):
        if timer.active():
            timer.cancel()
        return result
