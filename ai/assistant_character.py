"""AssistantCharacter: the assistant's body in the world, its journal, and its ears."""

from evennia.objects.objects import DefaultCharacter
from evennia.utils.ansi import strip_ansi

from .assistant_script import AssistantScript

SPEECH_TYPES = ("say", "whisper")


class AssistantCharacter(DefaultCharacter):
    """A character driven by an AssistantScript; players talk to it in its room."""

    def at_object_creation(self):
        super().at_object_creation()
        self.db.journal = {"entries": [], "consolidated_entry_ids": []}
        self.db.entity_profiles = {}
        self.scripts.add(AssistantScript, key="assistant_script")

    @property
    def assistant_script(self):
        """The AssistantScript driving this character, or None."""
        found = self.scripts.get("assistant_script")
        return found[0] if found else None

    def hear(self, speaker, text, event_type="speech"):
        """Queue what ``speaker`` said for the next tick."""
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
        """Hear speech in the room: what others say is queued as an event."""
        if isinstance(text, tuple) and len(text) > 1 and isinstance(text[1], dict):
            message, options = text[0], text[1]
            if (
                options.get("type") in SPEECH_TYPES
                and from_obj is not None
                and from_obj != self
                and not isinstance(from_obj, AssistantCharacter)
            ):
                self.hear(from_obj, spoken_words(strip_ansi(str(message))))
        return super().at_msg_receive(text=text, from_obj=from_obj, **kwargs)


def spoken_words(line):
    """Return the quoted speech of a line such as ``Alice says, "hi"``, or the whole line."""
    start, end = line.find('"'), line.rfind('"')
    if 0 <= start < end:
        return line[start + 1 : end]
    return line
