from django.db import migrations, models

import ai.fields


class Migration(migrations.Migration):

    dependencies = [
        ("ai", "0013_compaction_records_and_pins"),
    ]

    operations = [
        migrations.CreateModel(
            name="ToolOffering",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("model", models.CharField(max_length=255, unique=True)),
                (
                    "reason",
                    ai.fields.NulSafeTextField(
                        help_text="What the model did that made the switch."
                    ),
                ),
                ("updated", models.DateTimeField(auto_now=True)),
            ],
        ),
    ]
