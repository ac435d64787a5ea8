"""The terminal's network switch, and the auxiliary API key encrypted at rest.

The data step encrypts a key stored in clear by earlier versions (reading through the encrypted
field returns an old plaintext as it is; writing it back stores it encrypted). Reversing writes
the plaintext back in clear, so an older release can still read it.
"""
from django.db import migrations, models

import compression.models


def encrypt_stored_keys(apps, schema_editor):
    settings_model = apps.get_model("compression", "AuxiliarySettings")
    for row in settings_model.objects.using(schema_editor.connection.alias).exclude(api_key=""):
        settings_model.objects.using(schema_editor.connection.alias).filter(pk=row.pk).update(api_key=row.api_key)


def decrypt_stored_keys(apps, schema_editor):
    settings_model = apps.get_model("compression", "AuxiliarySettings")
    connection = schema_editor.connection
    table = connection.ops.quote_name(settings_model._meta.db_table)
    with connection.cursor() as cursor:
        for row in settings_model.objects.using(connection.alias).exclude(api_key=""):
            # Raw SQL: the field itself would encrypt the value again.
            cursor.execute(f"UPDATE {table} SET api_key = %s WHERE id = %s", [row.api_key, row.pk])


class Migration(migrations.Migration):
    dependencies = [("compression", "0003_model_defaults_custom_endpoint")]

    operations = [
        migrations.AddField(
            model_name="agentsettings",
            name="terminal_network",
            field=models.BooleanField(default=False, help_text="Let sandboxed terminal commands reach the "
                                                               "network. Off (default): no network inside the "
                                                               "sandbox. Valid: true or false."),
        ),
        migrations.AlterField(
            model_name="auxiliarysettings",
            name="api_key",
            field=compression.models.EncryptedTextField(blank=True, default="", verbose_name="API key"),
        ),
        migrations.RunPython(encrypt_stored_keys, decrypt_stored_keys),
    ]
