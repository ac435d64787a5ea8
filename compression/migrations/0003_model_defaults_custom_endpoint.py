from django.db import migrations, models

import compression.models


class Migration(migrations.Migration):
    dependencies = [("compression", "0002_seed_settings_and_prices")]

    operations = [
        migrations.AddField(
            model_name="modeldefaults", name="api_key",
            field=compression.models.EncryptedTextField(blank=True, default="", verbose_name="API key"),
        ),
        migrations.AddField(
            model_name="modeldefaults", name="base_url",
            field=models.CharField(blank=True, default="", max_length=500, verbose_name="base URL",
                                   help_text="An OpenAI-compatible endpoint (vLLM, llama.cpp server, Ollama, OpenRouter) "
                                             "offered as the custom route with the model above; give its window in "
                                             "context length. Valid: empty or an http(s) URL."),
        ),
    ]
