from django.urls import path

from staff import views

app_name = "staff"

urlpatterns = [
    path("staff/", views.dashboard, name="dashboard"),
    path("metrics", views.metrics, name="metrics"),
]
