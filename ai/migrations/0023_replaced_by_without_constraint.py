"""Drop the database constraint of ``ConversationMessage.replaced_by`` (see the model).

SQLite cannot drop a constraint: Django rebuilds the table, copying its rows, and the copy
restarts the table's id sequence at the highest id left. Ids of messages deleted since
(an undone compaction's summaries, a cleared history) would then be given again, while
journal entries still name them (``source_message_ids``): the sequence is kept.
"""

import django.db.models.deletion
from django.db import migrations, models

TABLE = "ai_conversationmessage"
_highest = {}  # database alias -> the sequence before the rebuild


def remember_sequence(apps, schema_editor):
    """Note the table's id sequence on SQLite, before the rebuild."""
    connection = schema_editor.connection
    if connection.vendor != "sqlite":
        return
    with connection.cursor() as cursor:
        cursor.execute("SELECT seq FROM sqlite_sequence WHERE name = %s", [TABLE])
        row = cursor.fetchone()
    _highest[connection.alias] = row[0] if row else 0


def restore_sequence(apps, schema_editor):
    """Put back the id sequence noted before the rebuild, where the rebuild lowered it."""
    connection = schema_editor.connection
    highest = _highest.pop(connection.alias, 0)
    if connection.vendor != "sqlite" or not highest:
        return
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE sqlite_sequence SET seq = MAX(seq, %s) WHERE name = %s", [highest, TABLE]
        )
        if not cursor.rowcount:
            cursor.execute(
                "INSERT INTO sqlite_sequence (name, seq) VALUES (%s, %s)", [TABLE, highest]
            )


class Migration(migrations.Migration):

    dependencies = [
        ("ai", "0022_pending_events_and_model_runs"),
    ]

    operations = [
        migrations.RunPython(remember_sequence, restore_sequence),
        migrations.AlterField(
            model_name="conversationmessage",
            name="replaced_by",
            field=models.ForeignKey(
                blank=True,
                db_constraint=False,
                help_text="The summary that replaced this message when it was compacted.",
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="replaced",
                to="ai.conversationmessage",
            ),
        ),
        migrations.RunPython(restore_sequence, remember_sequence),
    ]
