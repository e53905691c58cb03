"""Entity profiles: what the assistant observed about each person or thing, by dbref.

One :class:`~ai.models.EntityObservation` row per observation. The profile format of the
seeds is kept for readers: ``{dbref: {"name", "observations": [{"text", "timestamp",
"source_message_ids", "audience"}], "updated"}}``.
"""

from django.db import transaction

from ..audience import may_hear
from ..models import EntityObservation

MAX_OBSERVATIONS = 20  # per entity; the oldest are dropped first


def as_observation(row):
    """Return an observation row in the profile format (``audience`` only when private)."""
    observation = {
        "text": row.text,
        "timestamp": row.timestamp.isoformat(),
        "source_message_ids": list(row.source_message_ids or ()),
    }
    if row.audience:
        observation["audience"] = list(row.audience)
    return observation


def add_observation(character, target, text, source_message_ids=(), audience=None):
    """Note ``text`` about ``target`` in ``character``'s profiles and return the profile.

    Only the newest ``MAX_OBSERVATIONS`` of an entity are kept.
    """
    with transaction.atomic():
        EntityObservation.objects.create(
            db_object_id=character.id,
            entity=target.dbref,
            entity_name=target.key,
            text=text,
            source_message_ids=list(source_message_ids),
            audience=sorted(audience) if audience else None,
        )
        rows = EntityObservation.objects.filter(db_object_id=character.id, entity=target.dbref)
        stale = rows.order_by("-id").values_list("id", flat=True)[MAX_OBSERVATIONS:]
        EntityObservation.objects.filter(id__in=list(stale)).delete()
    return entity_profiles(character, [target.dbref])[target.dbref]


def entity_profiles(character, entities=None):
    """Return the profiles of ``entities`` (dbrefs; all by default) in the seeds' format."""
    rows = EntityObservation.objects.filter(db_object_id=character.id)
    if entities is not None:
        rows = rows.filter(entity__in=list(entities))
    profiles = {}
    for row in rows:
        profile = profiles.setdefault(row.entity, {"name": row.entity_name, "observations": []})
        profile["observations"].append(as_observation(row))
        profile["name"], profile["updated"] = row.entity_name, row.timestamp.isoformat()
    return profiles


def observations_for(character, entity, audience, limit):
    """Return the texts of the newest ``limit`` observations of ``entity`` that ``audience``
    may hear, oldest first."""
    rows = EntityObservation.objects.filter(db_object_id=character.id, entity=entity)
    visible = [row.text for row in rows.order_by("-id") if may_hear(row.audience, audience)]
    return list(reversed(visible[:limit]))
