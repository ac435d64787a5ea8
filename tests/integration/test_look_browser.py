"""The look of the app in headless Chromium against the real stack: every page at 360, 390 and
1440 px in the light and the dark colour scheme (the system's, through `emulate_media`, and the
top bar's toggle) fits without horizontal scroll; the conversation page opens with the composer in
view and focused; the contrast computed from the rendered styles (getComputedStyle, WCAG's
relative luminance, the effective background found by walking up) meets AA for text, input
borders, the gauge's fill against its track and the focus ring; axe-core finds no serious or
critical violation; the content-security policy is on every response and the browser reports no
violation of it, also while a reply with a table and code streams over the websocket. A finished
reply is announced once through the polite live region, never chunk by chunk; `?` opens the
keyboard shortcuts and Esc closes them, the focus going back where it was."""
from __future__ import annotations

import re

import pytest
from axe_playwright_python.sync_playwright import Axe

from sessions.models import Conversation, Turn, UserPreference
from sessions.services.context import message_append
from simulator.policy import MARKDOWN_REPLY
from tests.browser import browser
from tests.integration.conftest import ARTIFACTS
from tests.integration.helpers import make_conversation, session_cookie, sim_control, wait_for
from tests.integration.test_browser_conversation import open_socket, send
from tests.staff import builders

# Layout, contrast, accessibility and the content policy do not depend on the database backend.
pytestmark = [pytest.mark.integration, pytest.mark.browser, pytest.mark.one_database]

WIDTHS = {360: 740, 390: 844, 1440: 900}  # width: height
# The stylesheets have no breakpoint between 360 and 390 px (theirs are at 640 and 900), so colours,
# focus rings and axe's findings at 360 are those at 390: they are checked at one width of each layout,
# and every width is checked for horizontal scroll.
STYLED_WIDTHS = (390, 1440)
SCHEMES = ["light", "dark"]
LONG_WORD = "Supercalifragilistic" * 12
WIDE_TABLE = ("| " + " | ".join(f"column {i}" for i in range(12)) + " |\n|" + "---|" * 12 + "\n| "
              + " | ".join(f"value-{i}-{'x' * 12}" for i in range(12)) + " |")
WIDE_CODE = "```python\nresult = compute(" + ", ".join(f"argument_{i}" for i in range(30)) + ")\n```"

# ---- what runs in the page ------------------------------------------------------------------

# The WCAG 2 contrast of colours as the page renders them. `background(el)` walks up from el to
# the first opaque background, compositing the translucent ones on the way.
CONTRAST_LIB = r"""
const parse = (c) => { const m = /rgba?\(([^)]+)\)/.exec(c || ""); if (!m) return null;
  const p = m[1].split(/[\s,\/]+/).filter(Boolean).map(Number); return [p[0], p[1], p[2], p.length > 3 ? p[3] : 1]; };
const lum = (c) => { const f = (v) => { v /= 255; return v <= 0.04045 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); };
  return 0.2126 * f(c[0]) + 0.7152 * f(c[1]) + 0.0722 * f(c[2]); };
const ratio = (a, b) => { const x = lum(a), y = lum(b); return (Math.max(x, y) + 0.05) / (Math.min(x, y) + 0.05); };
const over = (top, under) => { const a = top[3]; return [0, 1, 2].map((i) => top[i] * a + under[i] * (1 - a)).concat([1]); };
const background = (el) => { const layers = [];
  for (let e = el; e && e.nodeType === 1; e = e.parentElement) {
    const c = parse(getComputedStyle(e).backgroundColor);
    if (c && c[3] > 0) { layers.push(c); if (c[3] >= 1) break; } }
  let bg = [255, 255, 255, 1]; for (let i = layers.length - 1; i >= 0; i--) bg = over(layers[i], bg); return bg; };
const opacity = (el) => { let o = 1; for (let e = el; e && e.nodeType === 1; e = e.parentElement) o *= Number(getComputedStyle(e).opacity); return o; };
const shown = (el) => { const r = el.getBoundingClientRect(); return r.width > 0 && r.height > 0 &&
  el.checkVisibility({ checkOpacity: true, checkVisibilityCSS: true }) && !el.closest(".sr-only"); };
const name = (el) => el.tagName.toLowerCase() + (el.id ? "#" + el.id : "") +
  (typeof el.className === "string" && el.className ? "." + el.className.trim().split(/\s+/).join(".") : "");
"""

TEXT_CONTRAST = "() => {" + CONTRAST_LIB + r"""
  const failures = [];
  const check = (el, color, what) => {
    const bg = background(el), fg = over([color[0], color[1], color[2], color[3] * opacity(el)], bg);
    const cs = getComputedStyle(el), size = parseFloat(cs.fontSize), bold = Number(cs.fontWeight) >= 700;
    const needed = size >= 24 || (bold && size >= 18.66) ? 3 : 4.5, r = ratio(fg, bg);
    if (r < needed) failures.push(`${what} ${name(el)} ${r.toFixed(2)} < ${needed}`);
  };
  document.querySelectorAll("body *").forEach((el) => {
    if (el instanceof SVGElement || ["SCRIPT", "STYLE", "OPTION", "OPTGROUP"].includes(el.tagName)) return;
    if (el.closest(":disabled") || !shown(el)) return;
    const own = [...el.childNodes].some((n) => n.nodeType === 3 && n.textContent.trim());
    const control = el.matches("select, input[type=submit], input[type=button]") ||
                    (el.matches("input, textarea") && el.value);
    if (own || control) check(el, parse(getComputedStyle(el).color), "text");
    if (el.matches("input[placeholder], textarea[placeholder]") && !el.value)
      check(el, parse(getComputedStyle(el, "::placeholder").color), "placeholder");
  });
  return failures;
}"""

# Inputs need a boundary at 3:1 against what surrounds them: their border, or failing that their fill.
BORDER_CONTRAST = "() => {" + CONTRAST_LIB + r"""
  const failures = [];
  document.querySelectorAll("input:not([type=hidden]):not([type=checkbox]):not([type=radio]):not([type=submit]), select, textarea")
    .forEach((el) => { if (!shown(el)) return;
      const cs = getComputedStyle(el), around = background(el.parentElement);
      const border = parseFloat(cs.borderTopWidth) > 0 ? parse(cs.borderTopColor) : null;
      const r = Math.max(border ? ratio(over(border, around), around) : 1, ratio(background(el), around));
      if (r < 3) failures.push(`border ${name(el)} ${r.toFixed(2)} < 3`); });
  return failures;
}"""

# The gauge's fill against its track (and the markers) at every level, read from the rendered SVG.
METER_CONTRAST = "() => {" + CONTRAST_LIB + r"""
  const failures = [];
  document.querySelectorAll(".gauge").forEach((gauge) => {
    const before = gauge.className, fill = gauge.querySelector(".meter .fill"), track = gauge.querySelector(".meter .track");
    if (!fill || !track || !shown(gauge)) return;
    for (const level of ["ok", "warn", "high", "critical"]) {
      gauge.className = before.replace(/level-\w+/, "level-" + level);
      const t = parse(getComputedStyle(track).fill), f = parse(getComputedStyle(fill).fill), r = ratio(f, t);
      if (r < 3) failures.push(`meter ${level} fill/track ${r.toFixed(2)} < 3`);
      gauge.querySelectorAll(".marker line").forEach((line) => {
        const m = ratio(parse(getComputedStyle(line).stroke), t);
        if (m < 3) failures.push(`marker ${name(line.parentElement)} ${m.toFixed(2)} < 3`); });
    }
    gauge.className = before;
  });
  return failures;
}"""

# The focused element's ring: drawn, at least 2 px, 3:1 against what it is drawn over.
FOCUS_RING = "() => {" + CONTRAST_LIB + r"""
  const el = document.activeElement;
  if (!el || el === document.body) return null;
  const cs = getComputedStyle(el);
  if (cs.outlineStyle === "none" || parseFloat(cs.outlineWidth) < 2) return `no visible focus ring on ${name(el)}`;
  const behind = parseFloat(cs.outlineOffset) < 0 ? background(el) : background(el.parentElement);
  const r = ratio(parse(cs.outlineColor), behind);
  return r < 3 ? `focus ring ${name(el)} ${r.toFixed(2)} < 3` : "";
}"""

NO_HORIZONTAL_SCROLL = "document.documentElement.scrollWidth <= window.innerWidth"
COMPOSER_IN_VIEW = """() => { const r = document.querySelector('#composer-text').getBoundingClientRect();
  return window.scrollY === 0 && r.top >= 0 && r.bottom <= window.innerHeight && r.height > 0; }"""
WATCH_CSP = """document.addEventListener('securitypolicyviolation', (e) =>
  window.__cspViolation(`${e.violatedDirective} blocked ${e.blockedURI || 'inline'} in ${e.sourceFile}:${e.lineNumber} ${e.sample}`));"""


# ---- the stage --------------------------------------------------------------------------------


@pytest.fixture(autouse=True)
def clean_simulator(live):
    sim_control(live, "/_sim/faults", {"clear": True})
    yield
    sim_control(live, "/_sim/faults", {"clear": True})


@pytest.fixture
def root(django_user_model):
    """Staff with every permission: the dashboard and the admin."""
    return django_user_model.objects.create_superuser("root", password="root-password-1")


def conversation_with_everything(user) -> Conversation:
    """Long words, a wide code block and a wide markdown table, a compression, cache figures."""
    conversation = make_conversation(user)
    session = conversation.sessions.get()
    message_append(session=session, role="user", content=f"A word that never breaks: {LONG_WORD}\n/a/path/" + "deep/" * 40)
    message_append(session=session, role="assistant", content=f"{MARKDOWN_REPLY}\n\n{LONG_WORD}\n\n{WIDE_TABLE}\n\n{WIDE_CODE}")
    message_append(session=session, role="user", content="Thanks.")
    builders.call(conversation, prompt=1200, read=800, cost="0.01", nocache="0.03", session=session)
    builders.event(conversation, session, status="compressed", tokens_before=9000, tokens_after=3000,
                   messages_before=40, messages_after=12)
    builders.event(conversation, session, status="failed", trigger="manual", reason="the summariser timed out")
    return conversation


class Page:
    """One browser context in a colour scheme, logged in as `user` (or not), that records every
    CSP violation the page reports (event or console) and every missing CSP header."""

    def __init__(self, b, live, *, width: int, scheme: str, user=None, javascript: bool = True):
        self.base = f"http://127.0.0.1:{live.web_port}"
        self.context = b.new_context(viewport={"width": width, "height": WIDTHS.get(width, 900)},
                                     color_scheme=scheme, java_script_enabled=javascript)
        self.violations: list[str] = []
        self.errors: list[str] = []
        self.context.expose_function("__cspViolation", lambda text: self.violations.append(text))
        self.context.add_init_script(WATCH_CSP)
        if user is not None:
            self.context.add_cookies([{"name": "sessionid", "value": session_cookie(user), "url": self.base}])
        self.page = self.context.new_page()
        self.page.on("console", self._console)
        self.page.on("pageerror", lambda exc: self.errors.append(str(exc)))

    def _console(self, message) -> None:
        if "Content Security Policy" in message.text or "Content-Security-Policy" in message.text:
            self.violations.append(f"console: {message.text}")

    def open(self, path: str, *, status: int = 200) -> None:
        response = self.page.goto(self.base + path)
        assert response.status == status, (path, response.status)
        policy = response.headers.get("content-security-policy", "")
        assert "default-src 'self'" in policy and "unsafe-inline" not in policy and "unsafe-eval" not in policy, (path, policy)
        self.page.wait_for_load_state("load")

    def close(self) -> None:
        self.context.close()


def axe_serious(page) -> list[str]:
    results = Axe().run(page.page).response
    return [f"axe {v['id']} ({v['impact']}): {[n['target'] for n in v['nodes']][:3]}"
            for v in results["violations"] if v["impact"] in ("serious", "critical")]


def focus_rings(page, presses: int = 30) -> list[str]:
    problems = []
    for _ in range(presses):
        page.page.keyboard.press("Tab")
        problem = page.page.evaluate(FOCUS_RING)
        if problem:
            problems.append(problem)
    return sorted(set(problems))


def look_checks(page) -> list[str]:
    return (page.page.evaluate(TEXT_CONTRAST) + page.page.evaluate(BORDER_CONTRAST)
            + page.page.evaluate(METER_CONTRAST))


def admin_pages(page) -> list[str]:
    """/admin/ and every settings page the app's admin links to, with the config.yaml import."""
    page.open("/admin/")
    links = page.page.eval_on_selector_all("#content-main a[href^='/admin/compression/']:not(.addlink)",
                                           "els => els.map(a => a.getAttribute('href'))")
    return ["/admin/", *sorted(set(links)), "/admin/compression/compressionsettings/import-config/"]


# ---- the tests --------------------------------------------------------------------------------


@pytest.mark.parametrize("scheme", SCHEMES)
def test_every_page_fits_phones_and_meets_contrast_and_axe_in_the_scheme(live, alice, root, scheme):
    conversation = conversation_with_everything(alice)
    problems: list[str] = []
    with browser() as b:
        for width in WIDTHS:
            anonymous = Page(b, live, width=width, scheme=scheme)
            user = Page(b, live, width=width, scheme=scheme, user=alice)
            staff = Page(b, live, width=width, scheme=scheme, user=root)
            ours = [(anonymous, "/accounts/login/", 200, "login"), (user, "/", 200, "home"),
                    (user, f"/conversations/{conversation.id}/", 200, "conversation"),
                    (staff, "/staff/", 200, "staff"), (user, "/no/such/page", 404, "404")]
            for page, path, status, label in ours:
                page.open(path, status=status)
                where = f"{scheme} {width}px {label}:"
                assert page.page.evaluate("document.documentElement.dataset.theme") == "auto"
                if label == "conversation":
                    open_socket(page.page)
                    assert page.page.evaluate(COMPOSER_IN_VIEW), f"{where} the composer is not in view on load"
                    assert page.page.evaluate("document.activeElement.id") == "composer-text", where
                if not page.page.evaluate(NO_HORIZONTAL_SCROLL):
                    problems.append(f"{where} horizontal scroll {page.page.evaluate('document.documentElement.scrollWidth')}")
                if width in STYLED_WIDTHS:
                    problems += [f"{where} {p}" for p in look_checks(page) + focus_rings(page) + axe_serious(page)]
                if width == 390:
                    ARTIFACTS.mkdir(exist_ok=True)
                    page.page.screenshot(path=str(ARTIFACTS / f"look-{label}-{width}-{scheme}.png"), full_page=True)
            for path in admin_pages(staff):
                staff.open(path)
                if not staff.page.evaluate(NO_HORIZONTAL_SCROLL):
                    problems.append(f"{scheme} {width}px admin {path}: horizontal scroll")
            for page in (anonymous, user, staff):
                problems += page.violations + page.errors
                page.close()
    assert not problems, "\n".join(problems)


def test_the_theme_toggle_switches_at_once_and_is_remembered_per_user(live, alice, bob):
    conversation = conversation_with_everything(alice)
    with browser() as b:
        page = Page(b, live, width=390, scheme="light", user=alice)
        page.open(f"/conversations/{conversation.id}/")
        open_socket(page.page)
        p = page.page
        background = "() => getComputedStyle(document.body).backgroundColor"
        light = p.evaluate(background)
        p.evaluate("window.__sameDocument = true")
        p.click("#theme-toggle button[value=dark]")
        p.wait_for_function("() => document.documentElement.dataset.theme === 'dark'")
        assert p.evaluate("window.__sameDocument") is True  # no reload
        assert p.evaluate(background) != light
        assert p.get_attribute("#theme-toggle button[value=dark]", "aria-pressed") == "true"
        assert p.get_attribute("#theme-toggle button[value=auto]", "aria-pressed") == "false"
        wait_for(lambda: UserPreference.objects.filter(user=alice, theme="dark").exists(), 10, what="the saved theme")
        problems = look_checks(page) + focus_rings(page)
        assert not problems, "\n".join(problems)

        p.reload()  # the server renders the saved choice, whatever the system says
        assert p.evaluate("document.documentElement.dataset.theme") == "dark"
        p.emulate_media(color_scheme="dark")
        p.click("#theme-toggle button[value=light]")
        p.wait_for_function("() => document.documentElement.dataset.theme === 'light'")
        assert p.evaluate(background) == light  # light although the system is dark
        wait_for(lambda: UserPreference.objects.filter(user=alice, theme="light").exists(), 10, what="the saved theme")
        problems = look_checks(page)
        assert not problems, "\n".join(problems)
        assert page.violations == [] and page.errors == []
        page.close()

        # Per user: bob still follows his system.
        other = Page(b, live, width=390, scheme="dark", user=bob)
        other.open("/")
        assert other.page.evaluate("document.documentElement.dataset.theme") == "auto"
        assert other.page.evaluate(background) != light
        other.close()
    assert not UserPreference.objects.filter(user=bob).exists()


def test_the_theme_toggle_is_a_plain_form_without_javascript(live, alice):
    with browser() as b:
        page = Page(b, live, width=360, scheme="light", user=alice, javascript=False)
        page.open("/")
        with page.page.expect_navigation():
            page.page.click("#theme-toggle button[value=dark]")
        assert page.page.url.endswith("/")
        html = page.page.content()  # scripts are off: read the markup the server sent
        assert re.search(r'<html[^>]*data-theme="dark"', html)
        assert 'value="dark" title="Always dark" aria-pressed="true"' in html
        page.close()
    assert UserPreference.objects.get(user=alice).theme == "dark"


def test_a_streamed_reply_breaks_no_policy_and_is_announced_once_when_finished(live, alice):
    conversation = make_conversation(alice)
    with browser() as b:
        page = Page(b, live, width=360, scheme="dark", user=alice)
        page.open(f"/conversations/{conversation.id}/")
        p = page.page
        open_socket(p)
        assert p.get_attribute("#transcript", "aria-live") is None
        assert p.evaluate("document.querySelector('#transcript').closest('[aria-live]')") is None
        live_regions = p.eval_on_selector_all("[aria-live]", "els => els.map(e => e.id)")
        assert set(live_regions) <= {"notices", "announcer", "composer-length", "composer-error", "recall-results"}
        assert p.get_attribute("#turn-status .state", "role") == "status"

        sim_control(live, "/_sim/faults", {"fault": "slow=0.05", "count": 5})
        p.evaluate("""window.__announced = [];
          new MutationObserver(() => window.__announced.push(document.getElementById('announcer').textContent))
            .observe(document.getElementById('announcer'), {childList: true, characterData: true, subtree: true});""")
        send(p, "please answer in markdown")
        p.wait_for_selector("[data-role=streaming]", timeout=30_000)
        p.wait_for_function("() => { const s = document.querySelector('[data-role=streaming] .text'); "
                            "return s && s.textContent.length > 20; }", timeout=30_000)
        assert p.inner_text("#announcer") == ""  # nothing read while it streams
        reply = p.locator("#transcript > [data-role=assistant] .markdown").last
        reply.locator("table").wait_for(timeout=60_000)
        p.wait_for_function("() => document.getElementById('announcer').textContent.length > 0")
        announced = p.evaluate("window.__announced")
        assert len(announced) == 1 and announced[0].startswith("Assistant: Plan"), announced
        assert "def threshold" in announced[0]
        # The table's alignment is a class; nothing on the page has a style attribute.
        assert reply.locator("th.align-left").count() == 2 and reply.locator("td.align-right").count() == 2
        assert p.evaluate("document.querySelectorAll('[style]').length") == 0
        assert p.evaluate(NO_HORIZONTAL_SCROLL)
        wait_for(lambda: Turn.objects.filter(conversation=conversation, status="done").exists(), 30, what="the turn")
        problems = look_checks(page) + axe_serious(page)
        assert not problems, "\n".join(problems)
        assert page.violations == [], page.violations
        assert page.errors == []
        page.close()


def test_the_shortcuts_list_opens_with_its_button_or_question_mark_and_esc_gives_the_focus_back(live, alice):
    conversation = make_conversation(alice)
    with browser() as b:
        page = Page(b, live, width=1440, scheme="light", user=alice)
        page.open(f"/conversations/{conversation.id}/")
        p = page.page
        open_socket(p)
        assert p.evaluate("document.activeElement.id") == "composer-text"
        p.keyboard.type("?")  # in the composer `?` is just a character
        assert p.input_value("#composer-text") == "?" and not p.is_visible("#shortcuts")
        p.fill("#composer-text", "")

        p.focus("#compress-button")
        p.keyboard.press("?")
        p.wait_for_selector("#shortcuts", state="visible")
        text = p.inner_text("#shortcuts")
        for words in ("Enter", "Shift", "Esc", "?", "/compress", "/new"):
            assert words in text
        assert p.evaluate("document.activeElement.closest('#shortcuts') !== null")
        p.keyboard.press("Escape")
        p.wait_for_selector("#shortcuts", state="hidden")
        assert p.evaluate("document.activeElement.id") == "compress-button"

        p.click("#shortcuts-button")
        p.wait_for_selector("#shortcuts", state="visible")
        assert not axe_serious(page)
        p.keyboard.press("Escape")
        p.wait_for_selector("#shortcuts", state="hidden")
        assert p.evaluate("document.activeElement.id") == "shortcuts-button"
        assert page.violations == [] and page.errors == []
        page.close()


def test_on_a_phone_the_panels_are_below_the_composer_one_at_a_time_and_the_gauge_reads_without_colour(live, alice):
    conversation = conversation_with_everything(alice)
    with browser() as b:
        page = Page(b, live, width=390, scheme="light", user=alice)
        page.open(f"/conversations/{conversation.id}/")
        p = page.page
        open_socket(p)
        composer = p.locator("#composer-text").bounding_box()
        side = p.locator("#side").bounding_box()
        assert side["y"] >= composer["y"] + composer["height"]
        assert p.is_visible("#gauge") and not p.is_visible("#event-feed") and not p.is_visible("#cache-panel")
        p.click(".side-tabs button[data-panel=event-feed]")
        assert p.is_visible("#event-feed") and not p.is_visible("#gauge")
        assert p.get_attribute(".side-tabs button[data-panel=event-feed]", "aria-pressed") == "true"
        p.click(".side-tabs button[data-panel=gauge]")

        # The level in words and figures; the two markers differ in shape, named in the legend.
        gauge = p.inner_text("#gauge")
        assert re.search(r"\b(Empty|OK|Nearing|Over|Critical)\b", gauge) and "tokens" in gauge
        assert "▼ compression threshold" in gauge and "◆ gateway hygiene" in gauge
        meter = p.locator("#gauge [role=meter]")
        assert "tokens" in meter.get_attribute("aria-valuetext")
        dashes = p.eval_on_selector_all("#gauge .marker line", "els => els.map(l => getComputedStyle(l).strokeDasharray)")
        assert len(set(dashes)) == 2
        shapes = p.eval_on_selector_all("#gauge .marker path", "els => els.map(e => e.getAttribute('d'))")
        assert len(set(shapes)) == 2
        assert p.evaluate("document.querySelectorAll('[style]').length") == 0

        # Wide screens show every panel at once.
        p.set_viewport_size({"width": 1440, "height": 900})
        assert all(p.is_visible(f"#{panel}") for panel in ("gauge", "event-feed", "recall-panel", "cache-panel"))
        assert page.violations == [] and page.errors == []
        page.close()


def test_the_policy_has_no_inline_allowance_and_names_the_websocket(live, alice):
    with browser() as b:
        page = Page(b, live, width=1440, scheme="light", user=alice)
        response = page.page.goto(page.base + "/")
        policy = dict(part.strip().split(" ", 1) for part in response.headers["content-security-policy"].split(";"))
        assert policy["default-src"] == "'self'" and policy["script-src"] == "'self'" and policy["style-src"] == "'self'"
        assert "'self'" in policy["connect-src"] and "ws://127.0.0.1:*" in policy["connect-src"]
        page.close()
