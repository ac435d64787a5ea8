"""Chat turns: a queued turn keeps its text until it starts; stop, partial text, regenerate and edit;
stopped and replaced messages."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('agent_sessions', '0005_message_search'),
    ]

    operations = [
        migrations.AddField(
            model_name='message',
            name='replaced',
            field=models.BooleanField(default=False, help_text='Replaced by a regenerated reply or an edited message: archived, kept in the transcript.'),
        ),
        migrations.AddField(
            model_name='message',
            name='stopped',
            field=models.BooleanField(default=False, help_text='A reply cut short by Stop: the text that had arrived.'),
        ),
        migrations.AddField(
            model_name='turn',
            name='kind',
            field=models.CharField(choices=[('message', 'message'), ('regenerate', 'regenerate'), ('edit', 'edit')], default='message', max_length=12),
        ),
        migrations.AddField(
            model_name='turn',
            name='partial_text',
            field=models.TextField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='turn',
            name='stop_requested',
            field=models.BooleanField(default=False),
        ),
        migrations.AddField(
            model_name='turn',
            name='text',
            field=models.TextField(blank=True, help_text='The message as sent, stored until the turn starts.'),
        ),
        migrations.AlterField(
            model_name='turn',
            name='error',
            field=models.TextField(blank=True, help_text='Why the turn failed, in words for the user.'),
        ),
        migrations.AlterField(
            model_name='turn',
            name='status',
            field=models.CharField(choices=[('queued', 'queued'), ('running', 'running'), ('done', 'done'), ('failed', 'failed'), ('stopped', 'stopped'), ('cancelled', 'cancelled')], default='queued', max_length=10),
        ),
    ]
