"""Assistant messages as safe HTML: markdown (markdown-it-py, CommonMark with tables,
strikethrough and hard line breaks), code blocks highlighted by Pygments, the result sanitised by nh3.

Two layers, so either alone still leaves hostile text inert: the parser never passes raw HTML
through (`html=False` escapes it) and refuses `javascript:`/`vbscript:`/`data:` links; nh3 then keeps
only the tags and attributes listed here, only http(s) and mailto URLs, and gives every link
`rel="noopener noreferrer"`. Images become plain links (no remote fetch when a reply is shown).
User messages are never rendered as markdown: the templates escape them.
"""
from __future__ import annotations

from functools import lru_cache

import nh3
from markdown_it import MarkdownIt
from markdown_it.common.utils import escapeHtml
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import get_lexer_by_name
from pygments.util import ClassNotFound

TAGS = {"p", "br", "hr", "strong", "em", "del", "s", "code", "pre", "blockquote", "ul", "ol", "li",
        "h1", "h2", "h3", "h4", "h5", "h6", "a", "table", "thead", "tbody", "tr", "th", "td", "div", "span"}
ATTRIBUTES = {"a": {"href", "title"}, "ol": {"start"}, "div": {"class"}, "span": {"class"}, "code": {"class"},
              "pre": {"class"}}
# A table column's alignment is a class, never a style attribute (the pages run under a
# content-security policy without 'unsafe-inline'); static/css/hermes.css aligns them.
ALIGN_CLASSES = {"left": "align-left", "center": "align-center", "right": "align-right"}
CELL_VALUES = {"class": set(ALIGN_CLASSES.values())}
_FORMATTER = HtmlFormatter(nowrap=True)
DARK_STYLE = "github-dark"  # every token colour of it is at least 6:1 against its background
CACHE_SIZE = 2048


def _highlight(code: str, lang: str, attrs: str) -> str:
    """A fenced block in Pygments' markup; an unknown or missing language stays plain (escaped)."""
    name = lang.split()[0] if lang else ""
    if not name:
        return ""
    try:
        lexer = get_lexer_by_name(name)
    except ClassNotFound:
        return ""
    # markdown-it keeps a highlighted block as it is when it starts with <pre>.
    return (f'<pre class="highlight"><code class="language-{escapeHtml(name)}">'
            f"{highlight(code, lexer, _FORMATTER)}</code></pre>")


def _image_as_link(self, tokens, idx, options, env) -> str:
    token = tokens[idx]
    alt = escapeHtml(self.renderInlineAsText(token.children or [], options, env)) or "image"
    return f'<a href="{escapeHtml(str(token.attrGet("src") or ""))}">{alt}</a>'


def _align_as_class(state) -> None:
    """markdown-it writes `style="text-align:…"` on table cells: make it a class."""
    for token in state.tokens:
        if token.type in ("th_open", "td_open"):
            style = str(token.attrs.pop("style", "") or "")
            align = style.partition(":")[2].strip()
            if align in ALIGN_CLASSES:
                token.attrSet("class", ALIGN_CLASSES[align])


def _parser() -> MarkdownIt:
    # `breaks`: a single newline is a line break, as chat models write and as the text streamed.
    md = MarkdownIt("commonmark", {"html": False, "linkify": False, "breaks": True, "highlight": _highlight})
    md.enable(["table", "strikethrough"])
    md.add_render_rule("image", _image_as_link)
    md.core.ruler.push("align_as_class", _align_as_class)
    return md


_MD = _parser()
_CLEANER = nh3.Cleaner(tags=TAGS, attributes=ATTRIBUTES, url_schemes={"http", "https", "mailto"},
                       link_rel="noopener noreferrer", tag_attribute_values={"th": CELL_VALUES, "td": CELL_VALUES},
                       set_tag_attribute_values={"a": {"target": "_blank"}})


@lru_cache(maxsize=CACHE_SIZE)
def render_markdown(text: str) -> str:
    """Sanitised HTML for an assistant message (cached: a transcript re-renders the same texts)."""
    if not text:
        return ""
    return _CLEANER.clean(_MD.render(text))


def pygments_css() -> str:
    """The stylesheet of the highlighted blocks (static/css/pygments.css is generated from it):
    Pygments' default style, and `DARK_STYLE` for the dark theme, chosen (data-theme="dark") or
    followed from the system (prefers-color-scheme: dark, unless the user chose light)."""
    light = HtmlFormatter().get_style_defs(".markdown .highlight")
    dark = HtmlFormatter(style=DARK_STYLE)

    def rules(selector: str) -> str:
        return "\n".join(dark.get_background_style_defs([selector]) + dark.get_token_style_defs([selector]))

    chosen = rules(':root[data-theme="dark"] .markdown .highlight')
    followed = rules(':root:not([data-theme="light"]) .markdown .highlight')
    return f"{light}\n{chosen}\n@media (prefers-color-scheme: dark) {{\n{followed}\n}}\n"
