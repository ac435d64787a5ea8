from django.apps import AppConfig

from hermes_web import checks  # noqa: F401  (registers the system checks)


class HermesWebConfig(AppConfig):
    name = "hermes_web"
    verbose_name = "Hermes Web"
