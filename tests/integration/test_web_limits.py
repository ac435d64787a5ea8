"""The web process as the Procfile starts it refuses an oversized websocket frame with a close
frame (1009, message too big), and keeps serving."""
from __future__ import annotations

import asyncio

import pytest
import websockets

from tests.integration.helpers import make_conversation, receive_until, session_cookie

pytestmark = pytest.mark.integration


def test_a_two_megabyte_client_frame_is_closed_with_1009(live, alice):
    port = live.start_procfile_web("web-limits")
    try:
        conversation = make_conversation(alice)
        url = f"ws://127.0.0.1:{port}/ws/conversations/{conversation.id}/"
        headers = {"Cookie": f"sessionid={session_cookie(alice)}", "Origin": f"http://127.0.0.1:{port}"}

        async def oversized() -> websockets.exceptions.ConnectionClosed:
            async with websockets.connect(url, additional_headers=headers) as ws:
                await receive_until(ws, 'id="gauge"')
                await ws.send("x" * (2 * 1024 * 1024))
                with pytest.raises(websockets.exceptions.ConnectionClosed) as closed:
                    async with asyncio.timeout(15):
                        while True:
                            await ws.recv()
                return closed.value

        closed = asyncio.run(oversized())
        assert closed.rcvd is not None, f"no close frame: {closed}"
        assert closed.rcvd.code == 1009, closed

        async def again() -> str:
            async with websockets.connect(url, additional_headers=headers) as ws:
                return await receive_until(ws, 'id="gauge"')

        assert 'id="gauge"' in asyncio.run(again())  # the same process serves the next socket
        assert live.procs["web-limits"].poll() is None
    finally:
        live.kill("web-limits")
