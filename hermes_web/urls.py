from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_not_required
from django.templatetags.static import static
from django.urls import include, path
from django.views.generic import RedirectView

from hermes_web import views
from sessions import views_preferences

urlpatterns = [
    path("healthz", views.healthz, name="healthz"),
    # Browsers ask for /favicon.ico on pages that name no icon (the admin's): the same icon.
    path("favicon.ico", login_not_required(RedirectView.as_view(url=static("img/favicon.svg"), permanent=True))),
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("preferences/theme", views_preferences.theme_set, name="theme-set"),
    path("admin/", admin.site.urls),
    path("", include("staff.urls")),
    path("", include("sessions.urls")),
]
