"""The one-time notice records move from the staff app to this one; the table stays as it is."""
import django.db.models.deletion
import django.utils.timezone
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("agent_sessions", "0002_message_seq_unique"),
        ("staff", "0001_initial"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="UserNotice",
                    fields=[
                        ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                        ("key", models.CharField(max_length=64)),
                        ("shown_at", models.DateTimeField(default=django.utils.timezone.now)),
                        ("user", models.ForeignKey(on_delete=django.db.models.deletion.CASCADE,
                                                   related_name="notices_shown", to=settings.AUTH_USER_MODEL)),
                    ],
                    options={
                        "db_table": "staff_usernotice",
                        "constraints": [models.UniqueConstraint(fields=("user", "key"), name="one_notice_per_user_and_key")],
                    },
                ),
            ],
            database_operations=[],
        ),
    ]
