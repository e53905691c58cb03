"""A fact is only superseded by one kept for the same listeners (``ai.audience.may_supersede``).

Earlier versions let a public fact mark a whispered one out of date ("Alice's vault code is
now 1111", said aloud by another player, outdated what Alice whispered). This restores every
memory and observation that a fact of another audience superseded, then lets the first
later one of its own audience that replaces it (``ai.utils.facts.replaces``) supersede it,
as consolidation would have.
"""

from django.db import migrations

from ai.utils.facts import replaces


def same_audience(first, second):
    return sorted(first or ()) == sorted(second or ())


def resettle(rows, later_of, learned):
    """Restore ``rows`` superseded across audiences, and supersede each again by the first
    of ``later_of(row)`` kept for its own audience that replaces it (``learned(newer)``:
    when that was learned)."""
    for row in rows:
        if same_audience(row.superseded_by.audience, row.audience):
            continue
        newer = next(
            (
                later
                for later in later_of(row)
                if same_audience(later.audience, row.audience) and replaces(later.text, row.text)
            ),
            None,
        )
        row.superseded_by, row.invalid_at = newer, learned(newer) if newer else None
        row.save(update_fields=["superseded_by", "invalid_at"])


def resettle_supersessions(apps, schema_editor):
    MemoryLink = apps.get_model("ai", "MemoryLink")
    EntityObservation = apps.get_model("ai", "EntityObservation")
    links = MemoryLink.objects.filter(superseded_by__isnull=False).select_related("superseded_by")
    resettle(
        links,
        lambda link: MemoryLink.objects.filter(
            db_object_id=link.db_object_id, valid_from__gt=link.valid_from
        )
        .exclude(memory_id="")
        .order_by("valid_from", "id"),
        lambda newer: newer.valid_from,
    )
    observations = EntityObservation.objects.filter(superseded_by__isnull=False).select_related(
        "superseded_by"
    )
    resettle(
        observations,
        lambda row: EntityObservation.objects.filter(
            db_object_id=row.db_object_id, entity=row.entity, id__gt=row.id, consolidated=True
        ).order_by("id"),
        lambda newer: newer.timestamp,
    )


class Migration(migrations.Migration):

    dependencies = [
        ("ai", "0014_tool_offering"),
    ]

    operations = [
        migrations.RunPython(resettle_supersessions, migrations.RunPython.noop),
    ]
