"""AssistantCharacter: the assistant's body in the world, and its ears."""

import time
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

    def request(self, builder, text):
        """Queue a builder's request (``aitask``): a task that may take several steps."""
        script = self.assistant_script
        if script is None or not text:
            return
        script.queue_event(
            {"type": "request", "speaker": builder.dbref, "speaker_name": builder.key, "text": text}
        )

    def at_object_receive(self, moved_obj, source_location, move_type="move", **kwargs):
        """Queue a ``given`` event when a character (not an assistant) hands it ``moved_obj``.

        Evennia's ``give`` moves the object from the giver's inventory, so the source is
        the giver; an object created here or dropped on it from a room is no gift.
        """
        super().at_object_receive(moved_obj, source_location, move_type=move_type, **kwargs)
        script = self.assistant_script
        if script is None or not is_non_assistant_character(source_location):
            return
        script.queue_event(
            {
                "type": "given",
                "speaker": source_location.dbref,
                "speaker_name": source_location.key,
                "item": moved_obj.key,
                "item_ref": moved_obj.dbref,
            }
        )

    def at_new_arrival(self, arrival, source_location=None, **kwargs):
        """Queue an ``arrival`` event for a player's character that entered the room.

        A room calls this (``ai.rooms.AssistantRoomMixin``, Evennia's idiom for NPCs that
        react to arrivals). So that arrivals do not flood the assistant, only a character
        an account plays counts, never an assistant, not while the assistant sleeps, and
        the same character at most once per ``arrival_cooldown`` seconds.
        """
        script = self.assistant_script
        if script is None or script.db.operating_mode != "awake":
            return
        cooldown = script.get_config("arrival_cooldown")
        if cooldown is None or not arrival.account:
            return
        if not is_non_assistant_character(arrival):
            return
        noticed = self.ndb.arrivals_noticed or {}
        now = time.monotonic()
        last = noticed.get(arrival.dbref)
        if last is not None and now - last < cooldown:
            return
        noticed[arrival.dbref] = now
        self.ndb.arrivals_noticed = noticed
        script.queue_event(
            {"type": "arrival", "speaker": arrival.dbref, "speaker_name": arrival.key}
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


def is_non_assistant_character(obj):
    """Tell whether ``obj`` is a character and no assistant (whose deeds are no news)."""
    return isinstance(obj, DefaultCharacter) and not isinstance(obj, AssistantCharacter)


def spoken_words(line):
    """Return the quoted speech of a line such as ``Alice says, "hi"``, or the whole line."""
    start, end = line.find('"'), line.rfind('"')
    if 0 <= start < end:
        return line[start + 1 : end]
    return line


def posed_action(line, name):
    """Return a pose without its poser's name: ``Bob waves.`` -> ``waves.``."""
    return line[len(name) :].strip() if line.startswith(name) else line
