"""Index ``ConversationMessage.replaced_by`` for archived rows only (see the model).

The field's own index is dropped by name rather than by altering the field: on SQLite,
Django would rebuild the whole table to change ``db_index`` (and lower its id sequence,
see 0023), where dropping one index is all that changes.
"""

import django.db.models.deletion
from django.db import migrations, models

FIELD = models.ForeignKey(
    blank=True,
    db_constraint=False,
    db_index=False,
    help_text="The summary that replaced this message when it was compacted.",
    null=True,
    on_delete=django.db.models.deletion.SET_NULL,
    related_name="replaced",
    to="ai.conversationmessage",
)


def drop_field_index(apps, schema_editor):
    """Drop the whole index Django made for the ``replaced_by`` column."""
    model = apps.get_model("ai", "ConversationMessage")
    names = schema_editor._constraint_names(
        model, ["replaced_by_id"], index=True, type_=models.Index.suffix
    )
    for name in names:
        if name != "ai_replaced_by_idx":
            schema_editor.execute(schema_editor._delete_index_sql(model, name))


def make_field_index(apps, schema_editor):
    """Make the whole index of the ``replaced_by`` column again."""
    model = apps.get_model("ai", "ConversationMessage")
    field = model._meta.get_field("replaced_by")
    schema_editor.execute(schema_editor._create_index_sql(model, fields=[field]))


class Migration(migrations.Migration):

    dependencies = [
        ("ai", "0023_replaced_by_without_constraint"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="conversationmessage", name="replaced_by", field=FIELD
                )
            ],
            database_operations=[migrations.RunPython(drop_field_index, make_field_index)],
        ),
        migrations.AddIndex(
            model_name="conversationmessage",
            index=models.Index(
                condition=models.Q(("replaced_by__isnull", False)),
                fields=["replaced_by"],
                name="ai_replaced_by_idx",
            ),
        ),
    ]
