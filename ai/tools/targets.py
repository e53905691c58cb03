"""Finding what a tool's argument names: someone or something here, or a dbref."""

from evennia.utils.search import search_object
from evennia.utils.utils import dbref


def resolve_entity(character, entity):
    """Return ``(object, None)`` or ``(None, error)`` for a dbref or a name in the room."""
    entity = entity.strip()
    if dbref(entity):
        found = list(search_object(entity))
        if not found:
            return None, f"Nothing has the dbref {entity}."
        return found[0], None
    if character.location is None:
        return None, f"You are nowhere, so there is no {entity!r} around you."
    found = character.search(entity, location=character.location, quiet=True)
    exact = [obj for obj in found if obj.key.lower() == entity.lower()]
    # "Char" also matches "Char2" by prefix; an exact name settles it.
    found = exact or found
    if not found:
        return None, f"No one and nothing called {entity!r} is here; here: {around(character)}."
    if len(found) > 1:
        names = ", ".join(f"{obj.key} ({obj.dbref})" for obj in found)
        return None, f"{entity!r} could be any of: {names}. Use the dbref."
    return found[0], None


def around(character):
    """Return the names of what else is in ``character``'s room, for an error to list."""
    here = character.location.contents if character.location else []
    return ", ".join(obj.key for obj in here if obj != character) or "nothing"
