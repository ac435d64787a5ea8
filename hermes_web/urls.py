from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from hermes_web import views
from sessions import views_preferences

urlpatterns = [
    path("healthz", views.healthz, name="healthz"),
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("preferences/theme", views_preferences.theme_set, name="theme-set"),
    path("admin/", admin.site.urls),
    path("", include("staff.urls")),
    path("", include("sessions.urls")),
]
