from django.apps import AppConfig


class CompressionConfig(AppConfig):
    name = "compression"
    verbose_name = "Context compression"
