from django.urls import path

from sessions import views

urlpatterns = [
    path("", views.home, name="home"),
    path("conversations/new", views.conversation_create, name="conversation-create"),
    path("conversations/<uuid:conversation_id>/", views.conversation_detail, name="conversation"),
    path("conversations/<uuid:conversation_id>/send", views.conversation_send, name="conversation-send"),
    path("conversations/<uuid:conversation_id>/model", views.conversation_model_switch,
         name="conversation-model-switch"),
    path("conversations/<uuid:conversation_id>/compress", views.conversation_compress, name="conversation-compress"),
    path("conversations/<uuid:conversation_id>/compactions/<int:event_id>/originals", views.compaction_originals,
         name="compaction-originals"),
]
