"""`seq` becomes unique per session. Sessions that already hold duplicate values (from concurrent
appends before this constraint) are renumbered first, in their existing (seq, id) order, so every
message keeps its place and ties go to the message stored first."""
from django.db import migrations, models
from django.db.models import Count, F

BATCH = 500


def renumber_duplicate_seqs(apps, schema_editor):
    Message = apps.get_model("agent_sessions", "Message")
    rows = Message.objects.using(schema_editor.connection.alias)
    affected = (rows.values("session_id").annotate(total=Count("id"), distinct=Count("seq", distinct=True))
                .filter(total__gt=F("distinct")).values_list("session_id", flat=True))
    for session_id in list(affected):
        messages = list(rows.filter(session_id=session_id).order_by("seq", "id").only("id", "seq"))
        changed = []
        for position, message in enumerate(messages):
            if message.seq != position:
                message.seq = position
                changed.append(message)
        rows.bulk_update(changed, ["seq"], batch_size=BATCH)


class Migration(migrations.Migration):
    dependencies = [
        ("agent_sessions", "0001_initial"),
    ]

    operations = [
        migrations.RunPython(renumber_duplicate_seqs, migrations.RunPython.noop),
        migrations.AddConstraint(
            model_name="message",
            constraint=models.UniqueConstraint(fields=("session", "seq"), name="message_seq_unique_per_session"),
        ),
    ]
