"""Index live ``ConversationMessage`` rows only, and every row by script and position.

The live index held ``is_live`` as a column, so archiving a row moved it inside the index;
partial, it only loses the row (see the model). The foreign key's own index on
``db_script`` gives way to ``ai_script_position_idx``, which begins with that column. As in
0024, that index is dropped by name, after the new ones exist: altering the field would
make Django rebuild the whole table on SQLite.
"""

import django.db.models.deletion
from django.db import migrations, models

FIELD = models.ForeignKey(
    db_index=False,
    on_delete=django.db.models.deletion.CASCADE,
    related_name="ai_messages",
    to="scripts.scriptdb",
)


def drop_field_index(apps, schema_editor):
    """Drop the index Django made for the ``db_script`` column alone."""
    model = apps.get_model("ai", "ConversationMessage")
    names = schema_editor._constraint_names(
        model, ["db_script_id"], index=True, type_=models.Index.suffix
    )
    for name in names:
        schema_editor.execute(schema_editor._delete_index_sql(model, name))


def make_field_index(apps, schema_editor):
    """Make the index of the ``db_script`` column alone again."""
    model = apps.get_model("ai", "ConversationMessage")
    field = model._meta.get_field("db_script")
    schema_editor.execute(schema_editor._create_index_sql(model, fields=[field]))


class Migration(migrations.Migration):

    dependencies = [
        ("ai", "0024_partial_replaced_by_index"),
    ]

    operations = [
        migrations.AddIndex(
            model_name="conversationmessage",
            index=models.Index(fields=["db_script", "position"], name="ai_script_position_idx"),
        ),
        migrations.RemoveIndex(model_name="conversationmessage", name="ai_live_idx"),
        migrations.AddIndex(
            model_name="conversationmessage",
            index=models.Index(
                condition=models.Q(("is_live", True)),
                fields=["db_script", "position"],
                name="ai_live_idx",
            ),
        ),
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="conversationmessage", name="db_script", field=FIELD
                )
            ],
            database_operations=[migrations.RunPython(drop_field_index, make_field_index)],
        ),
    ]
