"""Attachments on each route: on the OpenAI-compatible one an image stays an `image_url` part without
its `_image` metadata and a PDF becomes the text the upload side extracted (or a note that it has
none); on the Anthropic route the `document` block goes as it is, without `_document`."""

from __future__ import annotations

import copy

import openai

from llm.convert import document_as_text, to_anthropic_request
from llm.openai_provider import OpenAICompatibleProvider, to_openai_messages
from tests.simulator.conftest import MODEL, SIM_KEY

PDF_SOURCE = {"type": "base64", "media_type": "application/pdf", "data": "JVBERi0xLjQK" * 50}
URL = "data:image/png;base64,iVBORw0KGgo="
M5 = {"type": "ephemeral"}


def report(text: str = "Quarterly report\fRevenue rose.", pages: int = 2, name: str = "report.pdf") -> dict:
    return {"type": "document", "source": PDF_SOURCE,
            "_document": {"name": name, "pages": pages, "text": text, "attachment": 13}}


def shot() -> dict:
    return {"type": "image_url", "image_url": {"url": URL},
            "_image": {"width": 640, "height": 480, "name": "shot.png", "attachment": 12}}


def attached(*parts) -> dict:
    return {"role": "user", "content": [{"type": "text", "text": "What do these say?"}, *parts], "_tokens": 99}


def test_a_pdf_becomes_its_extracted_text_and_an_image_stays_an_image_url():
    messages = [{"role": "system", "content": "Be brief."}, attached(shot(), report())]
    before = copy.deepcopy(messages)
    out = to_openai_messages(messages)
    assert out[1] == {"role": "user", "content": [
        {"type": "text", "text": "What do these say?"},
        {"type": "image_url", "image_url": {"url": URL}},
        {"type": "text", "text": "[PDF report.pdf, 2 pages]\nQuarterly report\fRevenue rose."},
    ]}
    assert messages == before  # the caller's messages are untouched
    assert meta_keys(out) == []
    assert "JVBERi0" not in str(out)  # the PDF's bytes never travel on this route


def test_a_pdf_without_a_text_layer_becomes_a_note():
    for empty in ("", "\f\f", "  \n"):
        assert document_as_text(report(text=empty, pages=3, name="scan.pdf")) == {
            "type": "text",
            "text": "[PDF scan.pdf, 3 pages: it has no text layer, so its content cannot be read on this route]"}


def test_one_page_is_one_page_and_a_marker_is_kept():
    part = {**report(text="Only page.", pages=1), "cache_control": M5}
    assert document_as_text(part) == {"type": "text", "text": "[PDF report.pdf, 1 page]\nOnly page.", "cache_control": M5}


def test_a_document_without_metadata_still_travels_as_text():
    assert document_as_text({"type": "document", "source": PDF_SOURCE, "title": "Minutes"}) == {
        "type": "text", "text": "[PDF Minutes: it has no text layer, so its content cannot be read on this route]"}
    plain = {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "plain words"}}
    assert document_as_text(plain) == {"type": "text", "text": "[PDF document.pdf]\nplain words"}


def test_a_pdf_inside_a_tool_result_is_converted_too():
    tool = {"role": "tool", "tool_call_id": "c1", "content": [{"type": "text", "text": "fetched"}, report(pages=1)]}
    assert to_openai_messages([tool])[0]["content"][1] == {
        "type": "text", "text": "[PDF report.pdf, 1 page]\nQuarterly report\fRevenue rose."}


def test_the_request_the_provider_builds_carries_the_text(server):
    provider = OpenAICompatibleProvider(base_url=server.openai_base_url, api_key=SIM_KEY, model=MODEL,
                                        client=openai.OpenAI(api_key=SIM_KEY, base_url=server.openai_base_url))
    body = provider.build_request([attached(report())], max_tokens=16)
    assert body["messages"][0]["content"][1]["text"].startswith("[PDF report.pdf, 2 pages]\n")
    reply = provider.client.chat.completions.create(**body)
    assert reply.usage.prompt_tokens > 0  # the simulator takes it as plain text


def test_the_anthropic_route_sends_the_document_block_as_it_is():
    body = to_anthropic_request([attached(shot(), report())], model=MODEL, max_tokens=16)
    content = body["messages"][0]["content"]
    assert content[1] == {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}
    assert content[2] == {"type": "document", "source": PDF_SOURCE}
    assert meta_keys(body) == []


def meta_keys(value) -> list[str]:
    """Every `_`-prefixed key anywhere in a request body."""
    if isinstance(value, dict):
        return [k for k in value if k.startswith("_")] + [k for v in value.values() for k in meta_keys(v)]
    return [k for v in value for k in meta_keys(v)] if isinstance(value, list) else []
