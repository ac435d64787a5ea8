// The conversation page's behaviour. Loaded as a file, never inline (the pages are meant to run
// under a content-security policy without 'unsafe-inline').
//
// - Enter sends, Shift+Enter inserts a newline, Esc stops the running turn; the same in the
//   *Edit last message* box (Enter resends, Esc there cancels the edit). On narrow screens the
//   composer shows its shorter placeholder (data-placeholder-narrow), which fits in its rows.
// - The composer is cleared only when the server accepted the message (2xx); a refused one keeps
//   its text, with the server's reason beside it. Past the length limit it warns instead of
//   cutting a paste.
// - The transcript follows new text only while the reader is at its bottom. It stays there when
//   something below it grows (the edit box opening) and when the server re-sends it whole (after
//   a regenerate or an edit, on a reconnect); a reader scrolled up keeps their place.
// - After Stop, Regenerate, Retry, Edit → Resend or Cancel the focus goes to the composer, never
//   to <body> when the button it was on leaves the page; a focused element the socket replaces
//   gets the focus back in its new copy (or the composer takes it).
// - Code blocks get a copy button above them (never over the code);
//   running compressions show their elapsed time; a cancelled queued message returns to an
//   empty composer.
// - What the reader opened (a summary, a tool result) stays open, and what they typed in a box
//   there (the *Edit last message* box) stays typed, caret and all, when the server re-renders
//   the part of the page it is in (a socket (re)connect re-sends the transcript and the status
//   line when the page's copy is stale): Resend sends the text typed, never the one the box was
//   served with.
// - The socket's element has data-live="synced" from the first message of each connection (the
//   whole live state, re-rendered from the database, or a comment saying the page already shows
//   it: the socket's URL names the state the page was served with) until the socket closes.
// - The composer has the focus when the page opens (its autofocus attribute). A finished
//   assistant message is announced once through the polite #announcer region (the transcript is
//   not live: it would read every streamed chunk); replies already on the page, re-sent on a
//   reconnect, are not announced again.
// - On phones the side panels are shown one at a time (.side-tabs); without this script they stack.
(function () {
  "use strict";

  var composer = document.getElementById("composer");
  var textarea = document.getElementById("composer-text");
  var lengthNote = document.getElementById("composer-length");
  var composerError = document.getElementById("composer-error");
  var BOTTOM_SLACK = 40; // px: "at the bottom" even when a few pixels short

  function transcript() { return document.getElementById("transcript"); }

  // ---- composer -----------------------------------------------------------------------------

  function maxChars() { return Number(textarea.dataset.maxChars || 0); }

  function checkLength() {
    var limit = maxChars();
    var n = textarea.value.length;
    if (!limit || n < limit * 0.9) {
      lengthNote.hidden = true;
      lengthNote.textContent = "";
      lengthNote.classList.remove("over");
      return;
    }
    lengthNote.hidden = false;
    if (n > limit) {
      lengthNote.textContent = n.toLocaleString() + " / " + limit.toLocaleString() +
        " characters: too long to send. Shorten it, or put large content in a file in the workspace.";
      lengthNote.classList.add("over");
    } else {
      lengthNote.textContent = n.toLocaleString() + " / " + limit.toLocaleString() + " characters";
      lengthNote.classList.remove("over");
    }
  }

  // The full placeholder wraps past the composer's rows on a phone: a shorter one there.
  var narrow = window.matchMedia ? window.matchMedia("(max-width: 640px)") : null;
  function fitPlaceholder() {
    if (!textarea || !textarea.dataset.placeholderNarrow) { return; }
    if (!textarea.dataset.placeholderWide) { textarea.dataset.placeholderWide = textarea.placeholder; }
    textarea.placeholder = narrow && narrow.matches ? textarea.dataset.placeholderNarrow : textarea.dataset.placeholderWide;
  }
  if (narrow) {
    fitPlaceholder();
    if (narrow.addEventListener) { narrow.addEventListener("change", fitPlaceholder); }
  }

  if (textarea) {
    textarea.addEventListener("keydown", function (e) {
      if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
        e.preventDefault();
        if (textarea.value.trim()) { htmx.trigger(composer, "submit"); }
      }
    });
    textarea.addEventListener("input", function () {
      checkLength();
      if (composerError) { composerError.textContent = ""; }
    });
    composer.addEventListener("htmx:afterRequest", function (e) {
      if (e.detail.elt !== composer) { return; }
      var status = e.detail.xhr ? e.detail.xhr.status : 0;
      if (status >= 200 && status < 300) {
        composer.reset();
        if (composerError) { composerError.textContent = ""; }
        checkLength();
      }
    });
  }

  // ---- the edit box: Enter resends, Shift+Enter is a newline, Esc cancels ---------------------

  // The status line (and the box in it) is re-rendered by the socket: listen on the document.
  function editBox(el) { return el && el.id === "edit-text" ? el : null; }

  function cancelEdit() {
    var details = document.getElementById("edit-last");
    if (details) {
      var form = details.querySelector("form");
      if (form) { form.reset(); }
      details.open = false;
    }
    focusComposer();
  }

  document.addEventListener("keydown", function (e) {
    if (e.isComposing) { return; }
    var box = editBox(e.target);
    if (box && e.key === "Enter" && !e.shiftKey) {
      e.preventDefault();
      if (box.value.trim()) { htmx.trigger(box.form, "submit"); }
    } else if (e.key === "Escape" && e.target.closest && e.target.closest("#edit-last[open]")) {
      e.preventDefault();
      e.stopImmediatePropagation(); // not the page's Stop
      cancelEdit();
    }
  }, true);

  document.addEventListener("click", function (e) {
    if (e.target.closest && e.target.closest("#edit-last .edit-cancel")) {
      e.preventDefault();
      cancelEdit();
    }
  });

  // Opening the box puts the caret at the end of the message in it (the event comes a moment
  // after the click: leave the focus alone if it has gone somewhere else since).
  document.addEventListener("toggle", function (e) {
    if (e.target.id !== "edit-last" || !e.target.open) { return; }
    var box = document.getElementById("edit-text");
    var active = document.activeElement;
    if (box && (!active || active === document.body || active === e.target.querySelector("summary"))) {
      box.focus();
      box.setSelectionRange(box.value.length, box.value.length);
    }
  }, true);

  // ---- where the focus goes -------------------------------------------------------------------

  function focusComposer() { if (textarea) { textarea.focus(); } }

  // The buttons of an action (Stop, Regenerate, Retry, Resend) leave the page when the socket
  // re-renders the status line or the transcript: the composer takes the focus as the request
  // goes out, so it never falls to <body>.
  var ACTIONS = "#turn-status form, form.turn-retry";
  document.body.addEventListener("htmx:beforeRequest", function (e) {
    var form = e.detail.elt;
    if (form && form.matches && form.matches(ACTIONS)) { focusComposer(); }
  });

  // Anything else focused in a part the socket replaces: its new copy (with the caret where it
  // was, when the copy holds the same text), or the composer.
  var refocus = null;
  document.body.addEventListener("htmx:oobBeforeSwap", function (e) {
    var target = e.detail.target, active = document.activeElement;
    if (target && active && active !== document.body && target.contains(active)) {
      refocus = { id: active.id || "", caret: caretOf(active) };
    }
  });

  function caretOf(el) {
    try {
      if (typeof el.selectionStart !== "number") { return null; }
      return { value: el.value, start: el.selectionStart, end: el.selectionEnd, direction: el.selectionDirection };
    } catch (err) { return null; } // an input type without a selection
  }

  function restoreFocus() {
    if (refocus === null) { return; }
    var was = refocus;
    refocus = null;
    var active = document.activeElement;
    if (active && active !== document.body && active.isConnected) { return; }
    var again = was.id && document.getElementById(was.id);
    if (!(again && again.checkVisibility && again.checkVisibility())) { focusComposer(); return; }
    again.focus();
    if (was.caret && again.value === was.caret.value && again.setSelectionRange) {
      again.setSelectionRange(was.caret.start, was.caret.end, was.caret.direction || "none");
    }
  }

  // ---- Esc stops ----------------------------------------------------------------------------

  function popoverOpen() {
    var open = false;
    document.querySelectorAll("[popover]").forEach(function (p) {
      try { open = open || p.matches(":popover-open"); } catch (err) { /* no popover support */ }
    });
    return open;
  }

  document.addEventListener("keydown", function (e) {
    if (e.key !== "Escape" || e.isComposing) { return; }
    if (popoverOpen()) { return; } // Esc closes the open list first
    var stop = document.getElementById("stop-button");
    if (stop && !stop.disabled) {
      e.preventDefault();
      stop.click();
    }
  });

  // ---- cancelling a queued message ----------------------------------------------------------

  // Sent by this script rather than by htmx: the socket removes the queued entry (on every open
  // page) before the answer arrives, and htmx drops answers to elements no longer on the page.
  // A cancelled message's text comes back to an empty composer.
  function csrfToken() {
    try { return JSON.parse(document.body.getAttribute("hx-headers") || "{}")["X-CSRFToken"] || ""; }
    catch (err) { return ""; }
  }

  function showNotice(html) {
    var notices = document.getElementById("notices");
    if (notices && html) { notices.insertAdjacentHTML("beforeend", html); }
  }

  document.addEventListener("submit", function (e) {
    var form = e.target;
    if (!form.classList || !form.classList.contains("cancel-form")) { return; }
    e.preventDefault();
    var item = form.closest(".queued");
    var text = item ? item.querySelector(".text").textContent : "";
    fetch(form.action, { method: "POST", credentials: "same-origin",
                         headers: { "X-CSRFToken": csrfToken(), "HX-Request": "true" } })
      .then(function (response) {
        return response.text().then(function (body) {
          if (response.ok) {
            if (item) { item.remove(); }
            if (textarea && text && !textarea.value.trim()) {
              textarea.value = text;
              checkLength();
              body = body.replace("</span>", " Its text is back in the composer.</span>");
            }
          }
          showNotice(body);
        });
      });
  });

  // ---- follow the transcript only from its bottom ----------------------------------------

  var following = true;
  var keptScrollTop = null; // where a reader scrolled up was, when the transcript is replaced whole

  function atBottom(el) { return el.scrollHeight - el.scrollTop - el.clientHeight <= BOTTOM_SLACK; }

  // The transcript is a flex item: it gets shorter when something under it grows (the edit box
  // opening, a notice, the length note). Its scrollTop stays, so a reader at the bottom silently
  // stops being at it, and the next push (the whole transcript, re-sent after an edit) found them
  // "scrolled up" and left them at the top. Keep the bottom when the box changes size; judge
  // "at the bottom" by the height it had before (a scroll event can land between two steps of
  // one resize and see the reader short of the bottom).
  var heights = window.WeakMap ? new WeakMap() : null;
  var resized = window.ResizeObserver && heights ? new ResizeObserver(function (items) {
    items.forEach(function (item) {
      var el = item.target;
      var before = heights.has(el) ? heights.get(el) : el.clientHeight;
      heights.set(el, el.clientHeight);
      var wasAtBottom = el.scrollHeight - el.scrollTop - before <= BOTTOM_SLACK;
      if (el.isConnected && (following || wasAtBottom)) {
        following = true;
        el.scrollTop = el.scrollHeight;
      }
    });
  }) : null;

  var watched = null; // the transcript element observed (the server replaces it at times)

  function watchScroll(el) {
    if (!el || el.dataset.watched) { return; }
    el.dataset.watched = "1";
    el.addEventListener("scroll", function () { following = atBottom(el); });
    if (resized) {
      if (watched) { resized.unobserve(watched); }
      resized.observe(el);
    }
    watched = el;
  }

  function follow() {
    var el = transcript();
    watchScroll(el);
    if (!el) { return; }
    if (following) {
      el.scrollTop = el.scrollHeight;
    } else if (keptScrollTop !== null) {
      el.scrollTop = keptScrollTop; // a new element starts at the top: put the reader back
    }
    keptScrollTop = null;
  }

  document.body.addEventListener("htmx:wsBeforeMessage", function () {
    var el = transcript();
    if (el) { following = atBottom(el); }
  });
  document.body.addEventListener("htmx:oobBeforeSwap", function (e) {
    var target = e.detail.target;
    if (target && target.id === "transcript" && keptScrollTop === null) { keptScrollTop = target.scrollTop; }
  });
  document.body.addEventListener("htmx:wsAfterMessage", function () {
    follow();
    restoreFocus();
  });

  // ---- keep what the reader opened ----------------------------------------------------------

  // A <details> is known by the nearest element with an id around it (or itself) and its place
  // among that element's <details>: the same key finds its twin in the fragment about to land.
  function detailsKey(d) {
    var owner = d.id ? d : d.parentElement && d.parentElement.closest("[id]");
    if (!owner) { return null; }
    var index = owner === d ? 0 : Array.prototype.indexOf.call(owner.querySelectorAll("details"), d);
    return { id: owner.id, index: index, self: owner === d };
  }

  function twinOf(fragment, key) {
    var owner = fragment.querySelector("[id='" + key.id.replace(/'/g, "") + "']");
    if (!owner) { return null; }
    return key.self ? owner : owner.querySelectorAll("details")[key.index] || null;
  }

  // A text box the reader typed in (its value is no longer the one it was served with) hands
  // the text to its twin, known by its id: the server's copy holds the text it last rendered, and
  // the reader's draft would silently go back to it (and be what Resend sends).
  var TYPED = "textarea[id], input[id]:not([type]), input[id][type=text], input[id][type=search]";

  function carryTyped(target, fragment) {
    var boxes = target.matches(TYPED) ? [target] : [];
    target.querySelectorAll(TYPED).forEach(function (box) { boxes.push(box); });
    boxes.forEach(function (box) {
      if (box.value === box.defaultValue) { return; }
      var twin = fragment.querySelector("[id='" + box.id.replace(/'/g, "") + "']");
      if (twin && twin.tagName === box.tagName && twin.type === box.type) { twin.value = box.value; }
    });
  }

  document.body.addEventListener("htmx:oobBeforeSwap", function (e) {
    var target = e.detail.target, fragment = e.detail.fragment;
    if (!target || !fragment || !fragment.querySelector) { return; }
    var open = target.matches("details[open]") ? [target] : [];
    target.querySelectorAll("details[open]").forEach(function (d) { open.push(d); });
    open.forEach(function (d) {
      var key = detailsKey(d);
      var twin = key && twinOf(fragment, key);
      if (twin && twin.tagName === "DETAILS") { twin.open = true; }
    });
    carryTyped(target, fragment);
  });

  // ---- in step with the server ----------------------------------------------------------------

  // The first message of every connection is the whole live state, or a comment when the page
  // already shows it (sessions.consumers): until it lands the page shows what it was served with,
  // or what it had when the socket dropped.
  function setLive(e, synced) {
    var elt = e.target && e.target.closest ? e.target.closest("[ws-connect]") : null;
    if (!elt) { return; }
    if (synced) { elt.dataset.live = "synced"; } else { delete elt.dataset.live; }
  }
  document.body.addEventListener("htmx:wsConnecting", function (e) { setLive(e, false); });
  document.body.addEventListener("htmx:wsClose", function (e) { setLive(e, false); });
  document.body.addEventListener("htmx:wsAfterMessage", function (e) { setLive(e, true); });

  // ---- announce finished replies --------------------------------------------------------------

  var announcer = document.getElementById("announcer");
  var seen = {};
  var FINISHED = "#transcript article.entry.assistant:not(.streaming)";

  document.querySelectorAll(FINISHED).forEach(function (el) { seen[el.id] = true; });

  function announceFinished() {
    if (!announcer) { return; }
    var fresh = [];
    document.querySelectorAll(FINISHED).forEach(function (el) {
      if (!el.id || seen[el.id]) { return; }
      seen[el.id] = true;
      if (!el.closest(".entry-replaced")) { fresh.push(el); }
    });
    if (!fresh.length) { return; }
    var last = fresh[fresh.length - 1];
    var body = last.querySelector(".text");
    var text = (body ? body.textContent : "").replace(/\s+/g, " ").trim();
    announcer.textContent = "Assistant" + (last.classList.contains("stopped") ? " (stopped)" : "") + ": " + text;
  }

  // ---- side panels, one at a time on phones ------------------------------------------------

  var side = document.getElementById("side");
  if (side) {
    side.classList.add("tabbed");
    side.addEventListener("click", function (e) {
      var button = e.target.closest ? e.target.closest(".side-tabs button[data-panel]") : null;
      if (!button) { return; }
      side.dataset.panel = button.dataset.panel;
      side.querySelectorAll(".side-tabs button[data-panel]").forEach(function (b) {
        b.setAttribute("aria-pressed", b === button ? "true" : "false");
      });
    });
  }

  // A table or code block wider than the message scrolls by itself: reachable by keyboard too.
  function scrollablesFocusable(root) {
    (root || document).querySelectorAll(".markdown table, .markdown pre, .entry pre").forEach(function (el) {
      if (!el.hasAttribute("tabindex") && el.scrollWidth > el.clientWidth + 1) { el.setAttribute("tabindex", "0"); }
    });
  }

  // ---- copy buttons on code blocks --------------------------------------------------------

  // The button sits in a row above the block, outside the <pre>: inside it, it would cover the
  // end of the first line (on a phone, the code itself) and scroll away with wide code.
  function addCopyButtons(root) {
    (root || document).querySelectorAll(".markdown pre").forEach(function (pre) {
      if (pre.parentElement.classList.contains("code-block")) { return; }
      var block = document.createElement("div");
      block.className = "code-block";
      var button = document.createElement("button");
      button.type = "button";
      button.className = "copy-code";
      button.textContent = "Copy";
      button.setAttribute("aria-label", "Copy this code");
      pre.parentNode.insertBefore(block, pre);
      block.appendChild(button);
      block.appendChild(pre);
    });
  }

  document.addEventListener("click", function (e) {
    var button = e.target.closest ? e.target.closest(".copy-code") : null;
    if (!button) { return; }
    var pre = button.parentElement.querySelector("pre") || button.parentElement;
    var code = pre.querySelector("code") || pre;
    var text = code.textContent;
    var done = function () {
      button.textContent = "Copied";
      setTimeout(function () { button.textContent = "Copy"; }, 1500);
    };
    if (navigator.clipboard && navigator.clipboard.writeText) {
      navigator.clipboard.writeText(text).then(done, function () { button.textContent = "Copy failed"; });
    }
  });

  // New entries arrive over the socket: give their code blocks buttons as they land.
  new MutationObserver(function () {
    addCopyButtons();
    scrollablesFocusable();
    announceFinished();
  }).observe(document.body, { childList: true, subtree: true });
  addCopyButtons();
  scrollablesFocusable();

  // ---- elapsed time of running compressions -----------------------------------------------

  setInterval(function () {
    document.querySelectorAll(".elapsed[data-started]").forEach(function (el) {
      el.textContent = Math.max(0, Math.round(Date.now() / 1000 - Number(el.dataset.started))) + " s";
    });
  }, 1000);

  follow();
  if (textarea) { checkLength(); }
})();
