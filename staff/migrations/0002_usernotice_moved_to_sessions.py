"""UserNotice now belongs to the sessions app (same table); only the state changes here."""
from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("staff", "0001_initial"), ("agent_sessions", "0003_usernotice")]

    operations = [
        migrations.SeparateDatabaseAndState(state_operations=[migrations.DeleteModel(name="UserNotice")],
                                            database_operations=[]),
    ]
