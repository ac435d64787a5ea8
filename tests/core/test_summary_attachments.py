"""The summariser reads what was attached by name, never its bytes."""
from compression.core.summary import serialize_message

PNG = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}


def test_attachments_are_named_for_the_summariser_and_their_data_is_not_sent():
    msg = {"role": "user", "content": [
        {"type": "text", "text": "compare these"},
        {**PNG, "_image": {"width": 10, "height": 10, "name": "before.png", "attachment": 1}},
        dict(PNG),
        {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBERi0x"},
         "_document": {"name": "report.pdf", "pages": 2, "text": "page one\fpage two"}},
    ]}
    block = serialize_message(msg)
    assert block == "[USER]: compare these\n[image before.png] [PDF report.pdf, 2 pages] [image]"
    assert "AAAA" not in block and "JVBERi0x" not in block
