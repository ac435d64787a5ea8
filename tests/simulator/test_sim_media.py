"""Images and PDFs over HTTP with the official SDKs: the simulator bills an image by its real pixel
size and a PDF by its text and pages, with the product's own functions (`compression.core.media`),
so its usage equals the product's count; and it refuses what the API refuses, with the API's texts.

Images and PDFs are made here (Pillow; a PDF with a text layer written by hand, blank ones with
pypdf). A message's first block adds MESSAGE_OVERHEAD_TOKENS (4), as everywhere in the simulator.
"""

from __future__ import annotations

import base64
import io

import anthropic
import openai
import pypdf
import pytest
from PIL import Image

from compression.core.media import (
    MAX_IMAGE_BASE64_BYTES,
    PDF_PAGE_IMAGE_TOKENS,
    document_tokens,
    image_tokens,
)
from compression.core.tokens import MESSAGE_OVERHEAD_TOKENS, compute_message_tokens, count_tokens
from llm.convert import to_anthropic_request
from tests.media_files import text_pdf
from tests.simulator.conftest import MODEL, SIM_KEY

OV = MESSAGE_OVERHEAD_TOKENS
QUESTION = "What is in this attachment?"
SMALL_WINDOW = "sim-claude-32k"  # 32,000 tokens; 100 images or PDF pages per request
LARGE_WINDOW = "sim-claude-1m"  # 1M tokens; 600


def picture(width: int, height: int, fmt: str = "PNG") -> str:
    img = Image.new("RGB", (width, height), (200, 30, 30))
    buf = io.BytesIO()
    img.save(buf, format=fmt)
    return base64.b64encode(buf.getvalue()).decode()


def image(data: str, media_type: str = "image/png") -> dict:
    return {"type": "image", "source": {"type": "base64", "media_type": media_type, "data": data}}


def blank_pdf(pages: int) -> bytes:
    """Pages with no text layer at all (a scan without OCR reads the same)."""
    writer = pypdf.PdfWriter()
    for _ in range(pages):
        writer.add_blank_page(width=612, height=792)
    buf = io.BytesIO()
    writer.write(buf)
    return buf.getvalue()


def extracted(pdf: bytes) -> str:
    """The text the upload side records in `_document.text`: pages separated by a form feed."""
    return "\f".join(page.extract_text() or "" for page in pypdf.PdfReader(io.BytesIO(pdf)).pages)


def document(pdf: bytes, media_type: str = "application/pdf") -> dict:
    data = base64.b64encode(pdf).decode()
    return {"type": "document", "source": {"type": "base64", "media_type": media_type, "data": data}}


def ask(client, *blocks, model: str = MODEL):
    return client.messages.create(model=model, max_tokens=16, messages=[{"role": "user", "content": list(blocks)}])


def refusal(client, *blocks, model: str = MODEL) -> str:
    with pytest.raises(anthropic.BadRequestError) as info:
        ask(client, *blocks, model=model)
    assert info.value.status_code == 400 and info.value.body["error"]["type"] == "invalid_request_error"
    return info.value.api_message


def counted(client, *blocks, model: str = MODEL) -> int:
    return client.messages.count_tokens(model=model, messages=[{"role": "user", "content": list(blocks)}]).input_tokens


# -- what an image costs --------------------------------------------------------------------------

@pytest.mark.parametrize(("width", "height", "tokens"), [
    (200, 200, 54),  # small: unscaled, 40,000 / 750 = 53.3, up
    (1500, 1500, 1637),  # over the pixel budget: scaled to 1108 x 1108 = 1,227,664 px
    (4000, 500, 410),  # very wide: the long edge to 1568, so 1568 x 196 = 307,328 px
])
def test_usage_for_an_image_is_image_tokens_of_its_real_size_and_the_products_count(client, width, height, tokens):
    data = picture(width, height)
    assert image_tokens(width, height) == tokens
    expected = tokens + OV + count_tokens(QUESTION)
    reply = ask(client, image(data), {"type": "text", "text": QUESTION})
    assert reply.usage.input_tokens == expected
    assert counted(client, image(data), {"type": "text", "text": QUESTION}) == expected
    # The product's count of the same attachment, as the upload side records it, agrees exactly.
    internal = {"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{data}"},
         "_image": {"width": width, "height": height, "name": "shot.png", "attachment": 12}},
        {"type": "text", "text": QUESTION}]}
    assert compute_message_tokens(internal) + OV == expected
    body = to_anthropic_request([internal], model=MODEL, max_tokens=16)
    assert "_image" not in str(body)
    assert client.messages.create(**body).usage.input_tokens == expected


def test_the_openai_wire_counts_a_data_url_image_the_same(server):
    oai = openai.OpenAI(api_key=SIM_KEY, base_url=server.openai_base_url, max_retries=0)
    data = picture(1500, 1500)
    reply = oai.chat.completions.create(model=MODEL, max_tokens=16, messages=[{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{data}"}},
        {"type": "text", "text": QUESTION}]}])
    assert reply.usage.prompt_tokens == image_tokens(1500, 1500) + OV + count_tokens(QUESTION)


def test_an_image_in_a_tool_result_is_billed_by_its_size_too(client):
    data = picture(1000, 1000)
    call = {"type": "tool_use", "id": "toolu_1", "name": "screenshot", "input": {}}
    result = {"type": "tool_result", "tool_use_id": "toolu_1", "content": [image(data)]}
    messages = [{"role": "user", "content": "take a screenshot"}, {"role": "assistant", "content": [call]},
                {"role": "user", "content": [result]}]
    tokens = client.messages.count_tokens(model=MODEL, messages=messages).input_tokens
    without = client.messages.count_tokens(model=MODEL, messages=[
        *messages[:2], {"role": "user", "content": [{**result, "content": []}]}]).input_tokens
    assert tokens - without == image_tokens(1000, 1000) == 1334  # the vision page's "~1334" for 1000 x 1000


def test_images_count_towards_the_window(client):
    data = picture(1092, 1092)  # the vision page's largest unscaled square: ~1590 tokens
    assert ask(client, *[image(data)] * 20, model=SMALL_WINDOW).usage.input_tokens == 20 * 1590 + OV
    message = refusal(client, *[image(data)] * 21, model=SMALL_WINDOW)
    assert message == f"prompt is too long: {21 * 1590 + OV} tokens > 32000 maximum"


# -- what a PDF costs ------------------------------------------------------------------------------

def test_a_two_page_pdf_with_text_is_its_text_plus_a_page_image_each(client):
    pdf = text_pdf(["Quarterly report page one", "Revenue rose in the second quarter"])
    text = extracted(pdf)
    assert text == "Quarterly report page one\fRevenue rose in the second quarter"
    expected = document_tokens(count_tokens(text), 2) + OV + count_tokens(QUESTION)
    assert expected == count_tokens(text) + 2 * PDF_PAGE_IMAGE_TOKENS + OV + count_tokens(QUESTION)
    block = document(pdf)
    assert ask(client, block, {"type": "text", "text": QUESTION}).usage.input_tokens == expected
    assert counted(client, block, {"type": "text", "text": QUESTION}) == expected
    internal = {"role": "user", "content": [
        {**block, "_document": {"name": "report.pdf", "pages": 2, "text": text, "attachment": 13}},
        {"type": "text", "text": QUESTION}]}
    assert compute_message_tokens(internal) + OV == expected
    body = to_anthropic_request([internal], model=MODEL, max_tokens=16)
    assert body["messages"][0]["content"][0] == block  # the block goes as it is, without `_document`
    assert client.messages.create(**body).usage.input_tokens == expected


def test_a_pdf_without_a_text_layer_is_its_page_images_alone(client):
    pdf = blank_pdf(2)
    assert extracted(pdf).strip() == ""
    expected = document_tokens(0, 2) + OV
    assert expected == 2 * PDF_PAGE_IMAGE_TOKENS + OV
    assert ask(client, document(pdf)).usage.input_tokens == expected
    assert counted(client, document(pdf)) == expected
    internal = {"role": "user", "content": [
        {**document(pdf), "_document": {"name": "scan.pdf", "pages": 2, "text": extracted(pdf), "attachment": 14}}]}
    assert compute_message_tokens(internal) + OV == expected


# -- what the API refuses --------------------------------------------------------------------------

def test_too_many_images_in_one_request(client):
    dot = image(picture(8, 8))
    assert ask(client, *[dot] * 100).usage.input_tokens == 100 * image_tokens(8, 8) + OV
    assert refusal(client, *[dot] * 101) == "too many images and documents: 101 + 0 > 100"
    # PDF pages count against the same limit, and a 1M window takes 600.
    assert refusal(client, *[dot] * 99, document(blank_pdf(2))) == "too many images and documents: 99 + 2 > 100"
    assert ask(client, *[dot] * 101, model=LARGE_WINDOW).usage.input_tokens == 101 * image_tokens(8, 8) + OV
    with pytest.raises(anthropic.BadRequestError) as info:
        counted(client, *[dot] * 101)
    assert info.value.api_message == "too many images and documents: 101 + 0 > 100"


def test_an_image_over_the_maximum_dimensions(client):
    assert refusal(client, {"type": "text", "text": QUESTION}, image(picture(8001, 10))) == (
        "messages.0.content.1.image.source.base64.data: At least one of the image dimensions exceed max allowed "
        "size: 8000 pixels")
    assert ask(client, image(picture(8000, 10))).usage.input_tokens == image_tokens(8000, 10) + OV


def test_more_than_twenty_images_lower_the_maximum_dimensions_to_2000(client):
    dot, wide = image(picture(8, 8)), image(picture(2001, 10))
    ask(client, *[dot] * 19, wide)  # twenty images: 8,000 px still allowed
    assert refusal(client, *[dot] * 20, wide) == (
        "messages.0.content.20.image.source.base64.data: At least one of the image dimensions exceed max allowed "
        "size for many-image requests: 2000 pixels")


def test_an_image_over_the_byte_limit(client):
    # The API measures the base64 text: a small PNG with padding after its end is over 5 MB encoded.
    raw = base64.b64decode(picture(8, 8)) + b"\0" * (MAX_IMAGE_BASE64_BYTES * 3 // 4)
    data = base64.b64encode(raw).decode()
    assert len(data) > MAX_IMAGE_BASE64_BYTES
    assert refusal(client, image(data)) == (
        f"messages.0.content.0.image.source.base64: image exceeds 5 MB maximum: {len(data)} bytes > 5242880 bytes")


def test_an_unsupported_media_type(client):
    assert refusal(client, image(picture(8, 8, "BMP"), "image/bmp")) == (
        "messages.0.content.0.image.source.base64.media_type: Input should be 'image/jpeg', 'image/png', "
        "'image/gif' or 'image/webp'")


def test_data_whose_real_type_is_not_the_declared_one(client):
    assert refusal(client, image(picture(8, 8, "JPEG"), "image/png")) == (
        "messages.0.content.0.image.source.base64: The image was specified using the image/png media type, but "
        "the image appears to be a image/jpeg image")
    assert refusal(client, image(picture(8, 8, "BMP"), "image/png")) == (
        "messages.0.content.0.image.source.base64: The image was specified using the image/png media type, but "
        "the image appears to be a image/bmp image")
    assert refusal(client, image(base64.b64encode(b"not a picture").decode())) == "Could not process image"
    for fmt, media_type in (("JPEG", "image/jpeg"), ("GIF", "image/gif"), ("WEBP", "image/webp")):
        assert ask(client, image(picture(8, 8, fmt), media_type)).usage.input_tokens == image_tokens(8, 8) + OV


def test_a_pdf_over_the_page_limit(client):
    assert refusal(client, document(blank_pdf(101))) == "A maximum of 100 PDF pages may be provided."
    assert ask(client, document(blank_pdf(101)), model=LARGE_WINDOW).usage.input_tokens == document_tokens(0, 101) + OV
    assert refusal(client, document(blank_pdf(601)), model=LARGE_WINDOW) == "A maximum of 600 PDF pages may be provided."


def test_a_document_that_is_no_pdf(client):
    assert refusal(client, document(b"%PDF-1.4 this is not really one")) == (
        "messages.0.content.0.pdf.source.base64.data: The PDF specified was not valid.")
    assert refusal(client, document(text_pdf(["x"]), "text/plain")) == (
        "messages.0.content.0.document.source.base64.media_type: Input should be 'application/pdf'")
