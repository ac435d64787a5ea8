"""Who may see the staff dashboard's list of conversations: staff with the permission to view
conversations (superusers have every permission); other staff get a 403 naming it."""
from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission

from tests.staff import builders as b

pytestmark = pytest.mark.django_db

URL = "/staff/"


@pytest.fixture
def dana(django_user_model):
    """Staff without any permission."""
    return django_user_model.objects.create_user("dana", password="dana-password-1", is_staff=True)


def test_staff_without_the_permission_get_a_403_that_names_it_and_no_titles(client, dana, alice):
    b.conversation(alice, title="Private plans for the merger")
    client.force_login(dana)
    response = client.get(URL)
    assert response.status_code == 403
    body = response.content.decode()
    assert "Can view conversation" in body
    assert "Private plans" not in body and "alice" not in body


def test_staff_with_the_permission_see_the_conversations(client, dana, alice):
    b.conversation(alice, title="Private plans for the merger")
    dana.user_permissions.add(Permission.objects.get(codename="view_conversation",
                                                     content_type__app_label="agent_sessions"))
    client.force_login(dana)
    response = client.get(URL)
    assert response.status_code == 200
    assert "Private plans for the merger" in response.content.decode()


def test_a_superuser_sees_the_conversations(client, admin_user, alice):
    b.conversation(alice, title="Private plans for the merger")
    client.force_login(admin_user)
    assert "Private plans for the merger" in client.get(URL).content.decode()


def test_a_user_who_is_not_staff_gets_a_404(client, alice):
    client.force_login(alice)
    assert client.get(URL).status_code == 404
