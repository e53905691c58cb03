from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("ai", "0020_journal_lookup_indexes"),
    ]

    operations = [
        migrations.AddField(
            model_name="goal",
            name="turns",
            field=models.PositiveSmallIntegerField(
                default=0, help_text="Autonomous turns spent on it since it was last made active."
            ),
        ),
    ]
