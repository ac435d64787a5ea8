from django.urls import include, path

from sessions import views

urlpatterns = [
    path("", include("sessions.views_recall")),
    path("", include("sessions.views_sidebar")),
    path("", include("sessions.views_mcp")),
    path("", include("sessions.views_attachments")),
    path("", include("sessions.views_export")),
    path("", include("sessions.views_import")),
    path("", include("sessions.views_share")),
    path("", include("sessions.views_usage")),
    path("", views.home, name="home"),
    path("conversations/new", views.conversation_create, name="conversation-create"),
    path("conversations/<uuid:conversation_id>/", views.conversation_detail, name="conversation"),
    path("conversations/<uuid:conversation_id>/send", views.conversation_send, name="conversation-send"),
    path("conversations/<uuid:conversation_id>/model", views.conversation_model_switch,
         name="conversation-model-switch"),
    path("conversations/<uuid:conversation_id>/compress", views.conversation_compress, name="conversation-compress"),
    path("conversations/<uuid:conversation_id>/stop", views.turn_stop, name="turn-stop"),
    path("conversations/<uuid:conversation_id>/retry", views.turn_retry, name="turn-retry"),
    path("conversations/<uuid:conversation_id>/regenerate", views.turn_regenerate, name="turn-regenerate"),
    path("conversations/<uuid:conversation_id>/edit", views.turn_edit, name="turn-edit"),
    path("conversations/<uuid:conversation_id>/turns/<int:turn_id>/cancel", views.turn_cancel, name="turn-cancel"),
    path("conversations/<uuid:conversation_id>/compactions/<int:event_id>/originals", views.compaction_originals,
         name="compaction-originals"),
]
