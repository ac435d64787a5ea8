"""The conversation websocket: authenticate, check ownership, join the group, relay fragments."""
from __future__ import annotations

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer

from sessions import live, selectors
from sessions.events import SETTINGS_GROUP, group_name


class ConversationConsumer(AsyncWebsocketConsumer):
    async def connect(self) -> None:
        user = self.scope.get("user")
        conversation_id = self.scope["url_route"]["kwargs"]["conversation_id"]
        if user is None or not user.is_authenticated:
            await self.close(code=4401)
            return
        conversation = await database_sync_to_async(selectors.conversation_get_for_user)(
            user=user, conversation_id=conversation_id
        )
        if conversation is None:
            await self.close(code=4404)
            return
        self.conversation = conversation
        self.group = group_name(conversation.id)
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.channel_layer.group_add(SETTINGS_GROUP, self.channel_name)
        await self.accept()
        # A (re)connect re-renders the live panels from the database: nothing shown depends on
        # an event that was missed while the socket was down.
        html = await database_sync_to_async(live.live_state)(conversation)
        if html:
            await self.send(text_data=html)

    async def disconnect(self, code: int) -> None:
        group = getattr(self, "group", None)
        if group:
            await self.channel_layer.group_discard(group, self.channel_name)
            await self.channel_layer.group_discard(SETTINGS_GROUP, self.channel_name)

    async def receive(self, text_data=None, bytes_data=None) -> None:
        # The socket is server-to-browser only; messages go through the CSRF-protected form.
        return

    async def conversation_event(self, event: dict) -> None:
        await self.send(text_data=event["html"])

    async def settings_changed(self, event: dict) -> None:
        from sessions import fragments

        html = await database_sync_to_async(fragments.render_gauge)(self.conversation)
        await self.send(text_data=html)
