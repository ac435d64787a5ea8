from django.apps import AppConfig


class HermesWebConfig(AppConfig):
    name = "hermes_web"
    verbose_name = "Hermes Web"

    def ready(self) -> None:
        from hermes_web import checks  # noqa: F401  (registers the system checks)
