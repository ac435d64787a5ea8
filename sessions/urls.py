from django.urls import path

from sessions import views

urlpatterns = [
    path("", views.home, name="home"),
    path("conversations/new", views.conversation_create, name="conversation-create"),
    path("conversations/<uuid:conversation_id>/", views.conversation_detail, name="conversation"),
]
