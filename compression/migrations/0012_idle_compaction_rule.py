"""Cache-aware compaction timing gets its idle rule (``idle_compaction_when``) and is off by default:
with rolling_1h it lowers the bill only by compacting earlier, which keeps less verbatim (README,
Cache economics). An installation still on the old default that no admin ever chose keeps up with
the default; an admin's choice is left alone, and one that keeps the timing on keeps the rule it
ran, which was ``at_share``."""

from django.db import migrations, models


def follow_the_new_default(apps, schema_editor):
    _set_unchosen(apps, schema_editor, old=True, new=False)
    settings_model = apps.get_model("compression", "CompressionSettings")
    db = schema_editor.connection.alias
    settings_model.objects.using(db).filter(pk=1, idle_compaction=True).update(idle_compaction_when="at_share")


def back_to_the_old_default(apps, schema_editor):
    _set_unchosen(apps, schema_editor, old=False, new=True)


def _set_unchosen(apps, schema_editor, *, old: bool, new: bool) -> None:
    settings_model = apps.get_model("compression", "CompressionSettings")
    change = apps.get_model("compression", "SettingsChange")
    db = schema_editor.connection.alias
    if change.objects.using(db).filter(group="compression", field="idle_compaction").exists():
        return
    settings_model.objects.using(db).filter(pk=1, idle_compaction=old).update(idle_compaction=new)


class Migration(migrations.Migration):

    dependencies = [
        ('compression', '0011_compaction_timing'),
    ]

    operations = [
        migrations.AddField(
            model_name='compressionsettings',
            name='idle_compaction_when',
            field=models.CharField(default='due_this_turn', help_text="Which cold returns at or above the idle share compact. due_this_turn (default): only one whose projection plus the growth expected within the turn (its tool results, at the recent rate) reaches the threshold: a compaction that would come during the turn, with the cache warm again, moved to the cold moment. at_share: every one: more compactions, less held after a break, a lower bill and less kept verbatim (README, Cache economics). Valid: due_this_turn / at_share.", max_length=20),
        ),
        migrations.AlterField(
            model_name='compressionsettings',
            name='idle_compaction',
            field=models.BooleanField(default=False, help_text='Cache-aware timing. On: a conversation that returns after a pause longer than its longest prompt-cache entry, at or above the idle share of the threshold, is compacted before the turn (the cache is cold, so the compaction costs no extra cache write); while the cache is warm an early compaction waits for the next break or the threshold. Default off: with rolling_1h it lowers the bill only by compacting earlier (idle_compaction_when at_share), which keeps less verbatim; README, Cache economics. Valid: true or false.'),
        ),
        migrations.RunPython(follow_the_new_default, back_to_the_old_default),
    ]
