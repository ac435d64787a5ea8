"""The browser tests check colours, focus rings and axe at 390 px for both phone widths (360 and
390 px): that holds only while no stylesheet changes its rules between the two."""
import re
from pathlib import Path

from tests.integration.test_look_browser import STYLED_WIDTHS, WIDTHS

CSS = Path(__file__).resolve().parents[2] / "static" / "css"
WIDTH_QUERY = re.compile(r"\((?:max|min)-width:\s*([\d.]+)px\)")


def breakpoints() -> list[float]:
    return [float(v) for path in CSS.glob("*.css") for v in WIDTH_QUERY.findall(path.read_text())]


def test_the_stylesheets_have_width_queries_to_read():
    assert len(breakpoints()) >= 3  # the pattern still matches how the stylesheets write them


def test_every_unstyled_width_shares_its_rules_with_a_styled_one():
    points = breakpoints()
    for width in set(WIDTHS) - set(STYLED_WIDTHS):
        twin = min(STYLED_WIDTHS, key=lambda w: abs(w - width))
        between = [p for p in points if min(width, twin) <= p < max(width, twin)]
        assert not between, f"{width}px and {twin}px differ at {between}: check {width}px in full"
