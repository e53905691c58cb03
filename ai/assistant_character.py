"""AssistantCharacter: the assistant's body in the world, and its ears."""

from collections import deque

from evennia.objects.objects import DefaultCharacter
from evennia.utils.ansi import strip_ansi

from .assistant_script import AssistantScript

CONTEXT_BUFFER_SIZE = 20


class AssistantCharacter(DefaultCharacter):
    """A character driven by an AssistantScript; players talk to it in its room."""

    def at_object_creation(self):
        super().at_object_creation()
        self.scripts.add(AssistantScript, key="assistant_script")

    @property
    def assistant_script(self):
        """The AssistantScript driving this character, or None."""
        found = self.scripts.get("assistant_script")
        return found[0] if found else None

    def hear(self, speaker, text, event_type="speech"):
        """Queue what ``speaker`` said (``speech``, ``talk``, ``whisper``, ``pose``) for a tick.

        A whisper is private to its speaker (``ai.audience.event_audience``).
        """
        script = self.assistant_script
        if script is None or not text:
            return
        script.queue_event(
            {
                "type": event_type,
                "speaker": speaker.dbref if speaker else None,
                "speaker_name": speaker.key if speaker else "Someone",
                "text": text,
            }
        )

    def at_msg_receive(self, text=None, from_obj=None, **kwargs):
        """Hear the room: speech, whispers and poses naming the assistant become events.

        Everything else is ambience (the context buffer).
        """
        message, options = text, {}
        if isinstance(text, tuple):
            message, options = text[0], (text[1] if len(text) > 1 else {}) or {}
        if message and from_obj is not self:
            # Evennia's |/ becomes \r\n: one line break, as players meant it.
            line = strip_ansi(str(message)).replace("\r\n", "\n")
            kind = options.get("type")
            by_player = from_obj is not None and not isinstance(from_obj, AssistantCharacter)
            if by_player and kind in ("say", "whisper"):
                self.hear(from_obj, spoken_words(line), "speech" if kind == "say" else kind)
            elif by_player and kind == "pose" and self.key.lower() in line.lower():
                self.hear(from_obj, posed_action(line, from_obj.key), "pose")
            elif kind != "look":  # its own look is no news of the room
                self.remember_ambience(line)
        return super().at_msg_receive(text=text, from_obj=from_obj, **kwargs)

    def remember_ambience(self, line):
        """Keep the room's recent non-speech messages for the context buffer (not persisted)."""
        if self.ndb.context_buffer is None:
            self.ndb.context_buffer = deque(maxlen=CONTEXT_BUFFER_SIZE)
        self.ndb.context_buffer.append(line)


def spoken_words(line):
    """Return the quoted speech of a line such as ``Alice says, "hi"``, or the whole line."""
    start, end = line.find('"'), line.rfind('"')
    if 0 <= start < end:
        return line[start + 1 : end]
    return line


def posed_action(line, name):
    """Return a pose without its poser's name: ``Bob waves.`` -> ``waves.``."""
    return line[len(name) :].strip() if line.startswith(name) else line
