"""Rooms that tell the assistants in them who arrives.

Evennia tells a room, not its contents, that something arrived (``at_object_receive``);
its tutorials have the room pass the news to the NPCs inside. Mix ``AssistantRoomMixin``
into your Room typeclass for assistants to notice players arriving (see
``AssistantCharacter.at_new_arrival`` for which arrivals count).
"""

from evennia.objects.objects import DefaultRoom

from .assistant_character import AssistantCharacter


class AssistantRoomMixin:
    """Mixed into a Room typeclass: each assistant in the room hears of every arrival."""

    def at_object_receive(self, moved_obj, source_location, move_type="move", **kwargs):
        super().at_object_receive(moved_obj, source_location, move_type=move_type, **kwargs)
        for obj in self.contents:
            if obj != moved_obj and isinstance(obj, AssistantCharacter):
                obj.at_new_arrival(moved_obj, source_location, move_type=move_type)


class AssistantRoom(AssistantRoomMixin, DefaultRoom):
    """A room whose assistants notice who arrives."""
