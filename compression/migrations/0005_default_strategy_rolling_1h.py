"""rolling_1h becomes the default prompt-caching strategy (the cheapest under Anthropic's documented
caching rules in bench/cache_economics.py). An installation still on the old default that no admin
ever chose keeps up with the default; an admin's choice is left alone."""
from django.db import migrations, models


def follow_the_new_default(apps, schema_editor):
    settings_model = apps.get_model("compression", "PromptCachingSettings")
    change = apps.get_model("compression", "SettingsChange")
    db = schema_editor.connection.alias
    if change.objects.using(db).filter(group="caching", field="strategy").exists():
        return
    settings_model.objects.using(db).filter(pk=1, strategy="system_and_3").update(strategy="rolling_1h")


def back_to_the_old_default(apps, schema_editor):
    settings_model = apps.get_model("compression", "PromptCachingSettings")
    change = apps.get_model("compression", "SettingsChange")
    db = schema_editor.connection.alias
    if change.objects.using(db).filter(group="caching", field="strategy").exists():
        return
    settings_model.objects.using(db).filter(pk=1, strategy="rolling_1h").update(strategy="system_and_3")


class Migration(migrations.Migration):

    dependencies = [
        ('compression', '0004_agent_terminal_sandbox_and_key_at_rest'),
    ]

    operations = [
        migrations.AlterField(
            model_name='auxiliarysettings',
            name='base_url',
            field=models.CharField(blank=True, default='', help_text="The summariser's endpoint: required for custom (an OpenAI-compatible server); for anthropic, openrouter and nous it replaces the route's default URL; not used with auto, main or simulator. Valid: empty or an http(s) URL.", max_length=500, verbose_name='base URL'),
        ),
        migrations.AlterField(
            model_name='promptcachingsettings',
            name='cache_ttl',
            field=models.CharField(default='5m', help_text="Anthropic cache lifetime. 1h writes cost 2× input (5m: 1.25×) but survive longer pauses. system_and_3 at 1h bills 0.862 / 0.962 of system_and_3 at 5m on bench/cache_economics.py's two replays. Valid: 5m / 1h.", max_length=4, verbose_name='cache TTL'),
        ),
        migrations.AlterField(
            model_name='promptcachingsettings',
            name='strategy',
            field=models.CharField(default='rolling_1h', help_text="Where cache breakpoints go; input cost against system_and_3 on bench/cache_economics.py's two replays (steady / bursty) under Anthropic's documented caching rules. rolling_1h (default): after tool results 1h on the system prompt and the model's newest reply, the TTL above on the tool results; a turn's first request and the first after a compression as system_and_3 — 0.718 / 0.748. system_and_3: the system prompt and the last 3 messages (Hermes' rule) — 1.000. stable_prefix: 1h on the system prompt and summary — 0.997 / 0.998. warm_anchor: 1h on the system prompt, summary and previous request's end — 1.126 / 1.021 (0.753 / 0.874 only if re-marking a cached prefix 1h were free, which the documentation does not state). tools_and_3: the tool schemas instead of the system prompt — 1.000 / 1.000. none: no breakpoints — 4.49 / 3.65. Valid: one of the listed names.", max_length=60),
        ),
        migrations.RunPython(follow_the_new_default, back_to_the_old_default),
    ]
