"""Reflection (see ``ai.reflection``): an insight's citations, and which entries a reflection
has covered.

The entries a journal already holds count as covered: an upgrade must not make the first
idle tick reflect on a whole journal at once.
"""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("ai", "0015_supersession_within_one_audience"),
    ]

    operations = [
        migrations.AddField(
            model_name="journalentry",
            name="cites",
            field=models.JSONField(
                blank=True,
                default=list,
                help_text="An insight's sources: the entry ids it came from.",
            ),
        ),
        # Existing rows take True; the default for new rows is False, set just after.
        migrations.AddField(
            model_name="journalentry",
            name="reflected",
            field=models.BooleanField(default=True),
            preserve_default=False,
        ),
        migrations.AlterField(
            model_name="journalentry",
            name="reflected",
            field=models.BooleanField(
                default=False,
                help_text="Covered by a reflection, or never to be (insights, syntheses; see "
                "``ai.reflection``).",
            ),
        ),
        migrations.AddIndex(
            model_name="journalentry",
            index=models.Index(
                condition=models.Q(("reflected", False)),
                fields=["db_object", "id"],
                name="ai_entry_unreflected_idx",
            ),
        ),
    ]
