"""Images older than the newest image-bearing user message are stripped after a compaction."""

import copy

from compression.core.media import IMAGE_PLACEHOLDER, strip_historical_images
from compression.core.tokens import IMAGE_TOKENS

from .conftest import assistant, result, system, user

PNG = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBOR" * 100}}


def with_image(msg):
    return {**msg, "content": [{"type": "text", "text": msg["content"]}, copy.deepcopy(PNG)]}


def images_in(msg):
    content = msg.get("content")
    return sum(1 for p in content if isinstance(p, dict) and p.get("type") == "image") if isinstance(content, list) else 0


def test_it_strips_every_older_image_and_keeps_the_newest_users():
    msgs = [system(), with_image(user("old")), with_image(assistant("a")), with_image(result("c", "x")),
            with_image(user("new")), with_image(assistant("after"))]
    out = strip_historical_images(msgs)
    assert [images_in(m) for m in out] == [0, 0, 0, 0, 1, 1]
    assert out[1]["content"][1] == {"type": "text", "text": IMAGE_PLACEHOLDER}
    assert out[1]["content"][0]["text"] == "old"
    assert images_in(msgs[1]) == 1  # input untouched
    assert out[0] is msgs[0] and out[4] is msgs[4]


def test_a_text_only_newest_user_message_still_strips_older_images():
    msgs = [system(), with_image(user("shot")), assistant("a"), user("text only now")]
    assert [images_in(m) for m in strip_historical_images(msgs)] == [0, 1, 0, 0]
    msgs = [system(), with_image(assistant("tool shot")), with_image(user("mine")), user("text only now")]
    assert [images_in(m) for m in strip_historical_images(msgs)] == [0, 0, 1, 0]


def test_no_user_image_changes_nothing():
    msgs = [system(), with_image(assistant("a")), user("q")]
    assert strip_historical_images(msgs) == msgs


def test_compress_strips_historical_images_from_what_it_keeps(make_compressor):
    msgs = [system(), with_image(user("first screenshot")), assistant("looked at it")]
    for i in range(30):
        msgs += [user(f"q{i} " + "word " * 300), assistant(f"a{i} " + "word " * 300)]
    msgs += [with_image(user("kept in the tail but older")), assistant("ok"), with_image(user("newest")), assistant("fine")]
    res = make_compressor().compress(msgs)
    assert res.status == "compressed"
    kept = [m for m in res.messages if images_in(m)]
    assert len(kept) == 1 and kept[0]["content"][0]["text"] == "newest"
    assert any(IMAGE_PLACEHOLDER in str(m.get("content")) for m in res.messages)
    assert res.tokens_before - res.tokens_after > IMAGE_TOKENS  # the stripped images no longer count
