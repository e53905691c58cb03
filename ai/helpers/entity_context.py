"""Entity profiles: what the assistant observed about each person or thing, by dbref.

One :class:`~ai.models.EntityObservation` row per observation. The profile format of the
seeds is kept for readers: ``{dbref: {"name", "observations": [{"text", "timestamp",
"source_message_ids", "audience"}], "updated"}}``.
"""

from django.db import transaction
from django.utils import timezone

from ..audience import may_hear, may_supersede
from ..models import EntityObservation
from ..utils.facts import replaces
from ..utils.raw_rows import select_rows
from .journal import digest

# Current observations of an entity that a new one is compared with.
MERGE_WINDOW = 50


def as_observation(row):
    """Return an observation row in the profile format (``audience`` only when private)."""
    observation = {
        "text": row.text,
        "timestamp": row.timestamp.isoformat(),
        "source_message_ids": list(row.source_message_ids or ()),
    }
    if row.audience:
        observation["audience"] = list(row.audience)
    if row.invalid_at:
        observation["invalid_at"] = row.invalid_at.isoformat()
        observation["superseded_by"] = row.superseded_by.text if row.superseded_by else None
    return observation


def add_observation(character, target, text, source_message_ids=(), audience=None):
    """Note ``text`` about ``target`` in ``character``'s profiles and return the profile.

    Every observation is kept; the entity consolidation of the next sleep marks those that
    newer ones replace.
    """
    EntityObservation.objects.create(
        db_object_id=character.id,
        entity=target.dbref,
        entity_name=target.key,
        text=text,
        source_message_ids=list(source_message_ids),
        audience=sorted(audience) if audience else None,
    )
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
    """Return the texts of the newest ``limit`` current observations of ``entity`` that
    ``audience`` may hear, oldest first (superseded ones are history, not the profile)."""
    rows = select_rows(
        EntityObservation,
        ["text", "audience"],
        "db_object_id = %s AND entity = %s AND invalid_at IS NULL",
        [character.id, entity, limit * 4],
        "ORDER BY id DESC LIMIT %s",
    )
    visible = [text for text, heard_by in rows if may_hear(heard_by, audience)]
    return list(reversed(visible[:limit]))


def run_entity_consolidation_batch(script, character, batch_size):
    """Merge up to ``batch_size`` new observations into their entities' profiles.

    A new observation that says something else of what an older one said ("Dana moved to
    Rivertown" after "Dana lives in Oakvale") marks the older superseded, with when and by
    what; a repeat is folded into the observation it repeats (its sources added). Only an
    observation kept for the same listeners is superseded (``audience.may_supersede``).

    Returns:
        dict: ``consolidated`` (observation ids), ``superseded`` and ``merged`` (ids).
    """
    new = list(
        EntityObservation.objects.filter(db_object_id=character.id, consolidated=False).order_by(
            "id"
        )[:batch_size]
    )
    superseded, merged = [], []
    with transaction.atomic():
        for row in new:
            older = EntityObservation.objects.filter(
                db_object_id=character.id, entity=row.entity, id__lt=row.id, invalid_at__isnull=True
            ).order_by("-id")[:MERGE_WINDOW]
            for old in older:
                if not may_supersede(row.audience, old.audience):
                    continue
                if same_words(old.text, row.text) and old.audience == row.audience:
                    old.source_message_ids = [*old.source_message_ids, *row.source_message_ids]
                    old.save(update_fields=["source_message_ids"])
                    merged.append(row.id)
                    row.delete()
                    break
                if replaces(row.text, old.text):
                    old.invalid_at, old.superseded_by = row.timestamp or timezone.now(), row
                    old.save(update_fields=["invalid_at", "superseded_by"])
                    superseded.append(old.id)
        EntityObservation.objects.filter(id__in=[row.id for row in new]).update(consolidated=True)
    return {"consolidated": [row.id for row in new], "superseded": superseded, "merged": merged}


def same_words(first, second):
    """Return True when two observations say the same, case, spacing and end stop aside."""
    return digest(first) == digest(second)
