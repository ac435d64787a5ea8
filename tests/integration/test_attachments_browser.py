"""Attachments in headless Chromium against the real stack (Daphne, a Celery worker, Redis, the
simulator), at 1440 and 390 px: an image through the file picker, one pasted from the clipboard, a
text file dropped on the conversation, each a chip with its thumbnail or size, then sent. The
simulator's request log holds the image at its scaled size, the text file is in the workspace,
and after a reload the transcript still shows the thumbnails and the file link. A refused file
keeps the typed text and names its reason. No page error, no content-security violation."""
from __future__ import annotations

import base64
import io

import pytest
from PIL import Image

from compression.core.media import image_scaled_size
from sessions.models import Attachment, Turn
from tests.browser import browser
from tests.integration.conftest import ARTIFACTS
from tests.integration.helpers import make_conversation, sim_control, wait_for
from tests.integration.test_browser_conversation import login, open_socket

pytestmark = [pytest.mark.integration, pytest.mark.browser, pytest.mark.one_database]

VIEWPORTS = {1440: {"width": 1440, "height": 900}, 390: {"width": 390, "height": 844}}
PICKED = (2400, 1600)  # over the vision guide's limits: sent scaled down
PASTED = (320, 200)
NOTES = "# Trip notes\n\n- pack the charger\n- book the ferry\n"

PASTE = """([b64, name]) => {
  const bytes = Uint8Array.from(atob(b64), c => c.charCodeAt(0));
  const data = new DataTransfer();
  data.items.add(new File([bytes], name, {type: "image/png"}));
  const event = new ClipboardEvent("paste", {clipboardData: data, bubbles: true, cancelable: true});
  document.querySelector("#composer-text").dispatchEvent(event);
}"""
DROP = """([text, name]) => {
  const data = new DataTransfer();
  data.items.add(new File([text], name, {type: "text/markdown"}));
  const target = document.querySelector("#transcript");
  for (const type of ["dragenter", "dragover", "drop"]) {
    target.dispatchEvent(new DragEvent(type, {dataTransfer: data, bubbles: true, cancelable: true}));
  }
}"""


def png(size: tuple[int, int], color: str) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", size, color).save(out, "PNG")
    return out.getvalue()


def logged_images(value) -> list[tuple[int, int]]:
    """The (width, height) of every image the simulator logged for one request (any record in the
    entry with a width and a height)."""
    found = []
    if isinstance(value, dict):
        if isinstance(value.get("width"), int) and isinstance(value.get("height"), int):
            found.append((value["width"], value["height"]))
        for item in value.values():
            found += logged_images(item)
    elif isinstance(value, list):
        for item in value:
            found += logged_images(item)
    return found


def ready_chips(page, n: int) -> None:
    page.wait_for_function(f"() => document.querySelectorAll('.attachment-chip[data-state=ready]').length === {n}",
                           timeout=20_000)


# Console errors that are not faults: the browser logs the refused upload's 400 answer, and htmx
# logs an out-of-band delete whose element this page never showed (a queued entry the socket
# removed before it was drawn).
EXPECTED_CONSOLE = ("the server responded with a status of 400", "htmx:oobErrorNoTarget")


def watch(page) -> list[str]:
    """Page errors, and console errors (CSP violations among them) other than the expected ones."""
    problems: list[str] = []
    page.on("pageerror", lambda exc: problems.append(f"page error: {exc}"))
    page.on("console", lambda m: problems.append(f"console {m.type}: {m.text}")
            if m.type == "error" and not any(e in m.text for e in EXPECTED_CONSOLE) else None)
    return problems


def test_attach_by_picker_paste_and_drop_then_send_and_reload(live, alice):
    base = f"http://127.0.0.1:{live.web_port}"
    sim_control(live, "/_sim/faults", {"clear": True})
    ARTIFACTS.mkdir(exist_ok=True)
    logged = []
    with browser() as b:
        for width, viewport in VIEWPORTS.items():
            conversation = make_conversation(alice, model="sim-claude-200k")
            context = b.new_context(viewport=viewport)
            page = context.new_page()
            problems = watch(page)
            login(page, base, "alice", "alice-password-1")
            page.goto(f"{base}/conversations/{conversation.id}/")
            open_socket(page)
            assert page.locator("#composer-attachments").is_hidden()

            # A refused file names its reason and keeps the typed text.
            page.fill("#composer-text", f"What is in these files? ({width} px)")
            svg = b'<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>'
            page.set_input_files("#attachment-input", files=[{"name": "logo.png", "mimeType": "image/png", "buffer": svg}])
            page.locator("#composer-error [data-event=attachment-refused]", has_text="“logo.png” is SVG markup").wait_for()
            assert page.input_value("#composer-text") == f"What is in these files? ({width} px)"
            assert page.locator(".attachment-chip").count() == 0
            page.click("#composer-error .dismiss")

            # 1. The file picker.
            page.set_input_files("#attachment-input", files=[{"name": "wide-chart.png", "mimeType": "image/png",
                                                               "buffer": png(PICKED, "navy")}])
            ready_chips(page, 1)
            # 2. A pasted screenshot.
            page.evaluate(PASTE, [base64.b64encode(png(PASTED, "orange")).decode(), "image.png"])
            ready_chips(page, 2)
            # 3. A text file dropped on the conversation.
            page.evaluate(DROP, [NOTES, "trip-notes.md"])
            ready_chips(page, 3)
            chips = page.locator(".attachment-chip")
            assert chips.nth(0).locator(".attachment-name").inner_text() == "wide-chart.png"
            assert chips.nth(1).locator(".attachment-name").inner_text().startswith("pasted-image-")
            assert chips.nth(2).locator(".attachment-name").inner_text() == "trip-notes.md"
            assert chips.nth(2).locator(".attachment-size").inner_text() == f"{len(NOTES)} bytes"
            page.wait_for_function("() => [...document.querySelectorAll('.attachment-chip img.attachment-thumb')]"
                                   ".filter(i => i.complete && i.naturalWidth > 0).length === 2")
            assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth + 1")
            page.screenshot(path=str(ARTIFACTS / f"attachments-composer-{width}.png"))
            pending = list(Attachment.objects.filter(conversation=conversation).order_by("id"))
            assert [(a.kind, a.turn_id) for a in pending] == [("image", None), ("image", None), ("text", None)]

            page.press("#composer-text", "Enter")
            finished = Turn.objects.filter(conversation=conversation, status__in=Turn.FINISHED)
            turn = wait_for(finished.first, 60, what="the turn to finish")
            assert turn.status == "done", turn.error
            page.wait_for_function("() => document.querySelectorAll('#transcript > [data-role=assistant]').length === 1",
                                   timeout=30_000)
            page.wait_for_function("() => document.querySelectorAll('.attachment-chip').length === 0")
            assert page.input_value("#composer-text") == ""

            # The model got the picked image scaled down and the pasted one as it was.
            requests = [e for e in sim_control(live, "/_sim/stats")["log"]
                        if e.get("model") == "sim-claude-200k" and e.get("status") == 200]
            user = turn.user_message
            sent = [Image.open(io.BytesIO(base64.b64decode(p["image_url"]["url"].split(",", 1)[1]))).size
                    for p in user.content[1:]]
            assert sent == [image_scaled_size(*PICKED), PASTED]
            assert [(p["_image"]["width"], p["_image"]["height"]) for p in user.content[1:]] == sent
            assert (conversation.workspace / "trip-notes.md").read_text() == NOTES
            assert "[attached: trip-notes.md" in user.content[0]["text"]

            # After a reload the transcript shows the thumbnails and the file link.
            page.reload()
            open_socket(page)
            entry = page.locator("#transcript > [data-role=user]").last
            assert entry.locator(".text").inner_text() == f"What is in these files? ({width} px)"
            page.wait_for_function("() => [...document.querySelectorAll('#transcript .entry-attachments img')]"
                                   ".filter(i => i.complete && i.naturalWidth > 0).length === 2")
            link = entry.locator("a.attachment-link")
            assert link.inner_text() == "trip-notes.md"
            picked = Attachment.objects.get(conversation=conversation, name="wide-chart.png")
            assert entry.locator(f"a.attachment-thumb[href='/attachments/{picked.id}']").count() == 1
            full = page.request.get(f"{base}/attachments/{picked.id}")
            assert full.status == 200 and full.headers["content-type"] == "image/png"
            assert full.headers["x-content-type-options"] == "nosniff"
            assert Image.open(io.BytesIO(full.body())).size == PICKED  # the original, not the scaled copy
            page.screenshot(path=str(ARTIFACTS / f"attachments-transcript-{width}.png"))
            assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth + 1")
            assert problems == []
            context.close()
            logged.append(requests[-1])
    # The simulator's request log: the picked image arrived at its scaled size, the pasted one as it was.
    for entry in logged:
        images = logged_images(entry)
        assert images, f"the simulator's request log records no image sizes (docs/simulator.md): {entry}"
        assert sorted(images) == sorted([image_scaled_size(*PICKED), PASTED]), entry
