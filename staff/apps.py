from django.apps import AppConfig


class StaffConfig(AppConfig):
    name = "staff"
    label = "staff"
    verbose_name = "Staff dashboard"
