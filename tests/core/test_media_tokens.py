"""The documented formulas for images and PDFs (compression/core/media.py), and the product's counter
using them: each figure is the vision page's own or a hand computation written next to it."""

from __future__ import annotations

import math

import pytest

from compression.core.breakdown import context_breakdown
from compression.core.media import (
    MAX_IMAGE_PIXELS,
    MAX_IMAGE_TOKENS,
    PDF_PAGE_IMAGE_TOKENS,
    document_tokens,
    image_scaled_size,
    image_tokens,
    max_media_per_request,
)
from compression.core.tokens import (
    IMAGE_TOKENS,
    MESSAGE_OVERHEAD_TOKENS,
    compute_message_tokens,
    content_text,
    count_tokens,
    estimate_messages_tokens_rough,
    media_tokens,
)

from .conftest import result, user

DATA = "data:image/png;base64," + "B" * 400_000
PDF = {"type": "base64", "media_type": "application/pdf", "data": "J" * 400_000}
REPORT_TEXT = "Quarterly report\fRevenue rose by 12 % in the second quarter."


def shot(width, height, name="shot.png") -> dict:
    return {"type": "image_url", "image_url": {"url": DATA},
            "_image": {"width": width, "height": height, "name": name, "attachment": 12}}


def pdf(text=REPORT_TEXT, pages=2, name="report.pdf") -> dict:
    return {"type": "document", "source": PDF,
            "_document": {"name": name, "pages": pages, "text": text, "attachment": 13}}


# -- image_scaled_size and image_tokens -----------------------------------------------------------

def test_a_small_image_is_not_scaled_and_costs_the_vision_pages_figure():
    assert image_scaled_size(200, 200) == (200, 200)
    assert image_tokens(200, 200) == 54  # 40,000 / 750 = 53.3, up; the page says "~54"


def test_the_vision_pages_cost_examples():
    assert image_tokens(1000, 1000) == 1334  # 1,000,000 / 750 = 1333.3, up; "~1334"
    assert image_tokens(1092, 1092) == 1590  # 1,192,464 / 750 = 1589.95, up; "~1590"


@pytest.mark.parametrize(("width", "height"), [(1092, 1092), (951, 1268), (896, 1344), (819, 1456), (784, 1568)])
def test_the_largest_sizes_the_vision_page_says_are_not_resized_are_not(width, height):
    assert image_scaled_size(width, height) == (width, height)
    assert image_scaled_size(height, width) == (height, width)


def test_an_image_over_the_pixel_budget_is_scaled_keeping_its_aspect_ratio():
    # sqrt(1,229,312 / 4,000,000) = 0.55437; 2000 x 0.55437 = 1108.7, down: 1108 x 1108 = 1,227,664 px.
    assert image_scaled_size(2000, 2000) == (1108, 1108)
    assert image_tokens(2000, 2000) == 1637  # 1,227,664 / 750 = 1636.9, up
    # 3000 x 1500: the long edge binds first (1568 / 3000 < the area's 0.5227): 1568 x 784.
    assert image_scaled_size(3000, 1500) == (1568, 784)
    assert image_tokens(3000, 1500) == MAX_IMAGE_TOKENS == 1640  # 1,229,312 / 750 = 1639.1, up


def test_a_very_wide_image_gets_a_1568_pixel_long_edge():
    # 6000 x 300: 1568 / 6000 = 0.2613; 300 x 0.2613 = 78.4, down: 1568 x 78 = 122,304 px.
    assert image_scaled_size(6000, 300) == (1568, 78)
    assert image_tokens(6000, 300) == 164  # 122,304 / 750 = 163.07, up
    assert image_scaled_size(300, 6000) == (78, 1568)
    assert image_scaled_size(100_000, 1) == (1568, 1)  # never a zero side


def test_no_size_costs_more_than_the_largest_image_and_scaling_never_grows_one():
    for width in (1, 7, 199, 784, 1093, 1568, 1569, 2000, 3333, 8000, 12_345):
        for height in (1, 13, 500, 1092, 1568, 2500, 8000):
            w, h = image_scaled_size(width, height)
            assert w <= width and h <= height and max(w, h) <= 1568 and w * h <= MAX_IMAGE_PIXELS
            assert 1 <= image_tokens(width, height) <= MAX_IMAGE_TOKENS


@pytest.mark.parametrize("bad", [0, -5, 1.5, "100", True, None])
def test_a_size_that_is_no_positive_number_of_pixels_is_refused(bad):
    with pytest.raises(ValueError):
        image_tokens(bad, 100)
    with pytest.raises(ValueError):
        image_scaled_size(100, bad)


# -- document_tokens and the limits ---------------------------------------------------------------

def test_a_pdf_is_its_text_plus_one_largest_image_per_page():
    assert PDF_PAGE_IMAGE_TOKENS == MAX_IMAGE_TOKENS == 1640
    assert document_tokens(700, 2) == 700 + 2 * 1640
    assert document_tokens(0, 3) == 4920  # no text layer: the pages' images alone
    assert document_tokens(-4, -1) == 0


def test_the_limits_follow_the_context_window():
    assert [max_media_per_request(w) for w in (None, 32_000, 200_000, 999_999, 1_000_000)] == [100, 100, 100, 100, 600]


# -- the product's counter ------------------------------------------------------------------------

def test_an_image_with_its_size_counts_image_tokens_and_one_without_the_flat_estimate():
    sized = {"role": "user", "content": [{"type": "text", "text": "look"}, shot(1000, 1000)]}
    assert compute_message_tokens(sized) == count_tokens("look") + 1334
    assert estimate_messages_tokens_rough([sized]) == 1 + 1334  # "look": 4 characters / 4
    bare = {"role": "user", "content": [{"type": "text", "text": "look"}, {"type": "image_url", "image_url": {"url": DATA}}]}
    assert compute_message_tokens(bare) == count_tokens("look") + IMAGE_TOKENS


@pytest.mark.parametrize("meta", [{"width": "1000", "height": 1000}, {"width": True, "height": 5}, {"width": 0, "height": 9},
                                  {"height": 10}, None, "1000x1000"])
def test_an_unusable_size_falls_back_to_the_flat_estimate(meta):
    part = {"type": "image_url", "image_url": {"url": DATA}, "_image": meta}
    assert media_tokens([part]) == IMAGE_TOKENS


def test_an_image_inside_a_tool_result_counts_by_its_size():
    msg = user([{"type": "tool_result", "tool_use_id": "t", "content": [shot(6000, 300)]}])
    assert media_tokens(msg["content"]) == 164
    assert compute_message_tokens(msg) == 164  # the result holds no text


def test_a_document_counts_document_tokens_never_its_base64():
    msg = user([pdf(), {"type": "text", "text": "summarise it"}])
    expected = count_tokens("summarise it") + document_tokens(count_tokens(REPORT_TEXT), 2)
    assert compute_message_tokens(msg) == expected < 5_000
    assert "J" * 20 not in content_text(msg["content"]) and "Revenue" not in content_text(msg["content"])
    rough = math.ceil(len("summarise it") / 4) + document_tokens(math.ceil(len(REPORT_TEXT) / 4), 2)
    assert estimate_messages_tokens_rough([msg]) == rough


def test_a_document_without_a_text_layer_is_its_pages_alone():
    assert media_tokens([pdf(text="\f\f", pages=3)]) == 3 * 1640
    assert media_tokens([{"type": "document", "source": PDF}]) == 1640  # no `_document`: one page, no text
    plain = {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "plain words"}}
    assert media_tokens([plain]) == count_tokens("plain words")


def test_a_document_inside_a_tool_result_counts_too():
    msg = result("c1", [{"type": "text", "text": "fetched"}, pdf(pages=1)])
    assert compute_message_tokens(msg) == count_tokens("fetched" + "c1" + "tool") + document_tokens(
        count_tokens(REPORT_TEXT), 1)


# -- the breakdown --------------------------------------------------------------------------------

def test_the_breakdown_shows_images_and_documents_together_and_names_the_files():
    attached = user([{"type": "text", "text": "compare these"}, shot(1000, 1000), pdf()])
    plain = user("and nothing else")
    b = context_breakdown([attached, plain], tools_by_source={}, window=100_000)
    media = 1334 + document_tokens(count_tokens(REPORT_TEXT), 2)
    assert b.tokens("images") == media
    assert [p.label for p in b.parts if p.kind == "images"] == ["Images and documents"]
    assert b.tokens("messages") == count_tokens("compare these") + count_tokens("and nothing else") + 2 * MESSAGE_OVERHEAD_TOKENS
    assert b.largest[0].label == "User message · shot.png, report.pdf"
    assert b.largest[1].label == "User message"


def test_a_largest_item_names_at_most_three_files():
    many = user([shot(10, 10, f"s{i}.png") for i in range(5)])
    b = context_breakdown([many], tools_by_source={}, window=100_000)
    assert b.largest[0].label == "User message · s0.png, s1.png, s2.png, 2 more"
    screenshot = result("c1", [shot(10, 10, "page.png")], "browser")
    assert context_breakdown([screenshot], tools_by_source={}, window=1_000).largest[0].label == (
        "Tool result · browser · page.png")
