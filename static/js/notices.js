// Notices above the composer (#notices) and the questions asked in a modal <dialog>. Loaded as a
// file, never inline (the pages run under a content-security policy without 'unsafe-inline').
//
// - At most one notice of each kind (`data-kind`, set by the server): whenever a notice lands in
//   #notices (an htmx answer, a socket push, a script's insertion), the earlier ones of its kind go.
// - A notice goes by itself once what it announced happened: `data-expires-on`, a CSS selector,
//   as soon as something on the page matches it (the event feed showing that its compression
//   ended, say); `data-expires-after`, after that many seconds, though not while the pointer or
//   the focus is on it. Every notice keeps its dismiss button; a dismissed notice that held the
//   focus hands it to a neighbour's dismiss button or the composer.
// - A question (`data-confirm`: the model switch's) is moved into #confirm-dialog and opened with
//   showModal(): the rest of the page is inert and Tab cycles inside it. The focus starts on its
//   safest control (`data-confirm-cancel`) and goes back to the control that asked when it
//   closes. Esc or Cancel closes it and does nothing else: Esc there never reaches the page's own
//   Esc-stops-the-turn (this script is loaded first and listens on window, in the capture phase).
//   The answer to it (a notice of the same kind) closes it too. Without JavaScript the question
//   is a page of its own (confirm.html) and Cancel a link back to the conversation.
(function () {
  "use strict";

  var notices = document.getElementById("notices");
  var dialog = document.getElementById("confirm-dialog");
  if (!notices) { return; }
  var canAsk = !!(dialog && typeof dialog.showModal === "function");
  var RETRY_MS = 2000; // a timed notice the reader is pointing at or focused on waits this long again

  // ---- what had the focus when a request went out (where the focus returns after a question) --

  var opener = null;
  var returnFocus = null;

  document.body.addEventListener("htmx:beforeRequest", function (e) {
    var elt = e.detail.elt;
    if (canAsk && dialog.contains(elt)) { return; }
    var active = document.activeElement;
    opener = active && active !== document.body ? active : elt;
  });

  function focusable(el) {
    if (!el || !el.isConnected) { return null; }
    if (el.tagName === "FORM") { return el.querySelector("[type=submit]"); }
    return el;
  }

  // ---- removing a notice without losing the focus -------------------------------------------

  function composerField() { return document.getElementById("composer-text"); }

  // Where the focus goes when the notice holding it goes: the next notice's dismiss button, the
  // previous one's, else the composer.
  function focusAfter(notice) {
    var next = notice.nextElementSibling, prev = notice.previousElementSibling;
    var neighbour = (next && next.querySelector(".dismiss")) || (prev && prev.querySelector(".dismiss"));
    return neighbour || composerField();
  }

  function removeNotice(notice) {
    var hadFocus = notice.contains(document.activeElement);
    var then = hadFocus ? focusAfter(notice) : null;
    notice.remove();
    if (then) { then.focus(); }
  }

  // Dismissed (any notice on the page, the attachment errors beside the composer too): gone, and
  // the focus, if it was on it, goes to a neighbour or the composer at once.
  document.addEventListener("click", function (e) {
    var button = e.target.closest ? e.target.closest(".notice .dismiss") : null;
    if (button) { removeNotice(button.closest(".notice")); }
  });

  // ---- expiry -------------------------------------------------------------------------------

  function expireLater(notice, seconds) {
    setTimeout(function tick() {
      if (!notice.isConnected) { return; }
      if (notice.matches(":hover") || notice.contains(document.activeElement)) {
        setTimeout(tick, RETRY_MS);
        return;
      }
      removeNotice(notice);
    }, seconds * 1000);
  }

  function matches(selector) {
    try { return !!document.querySelector(selector); }
    catch (err) { return false; } // a selector this browser cannot read: the notice waits for its dismissal
  }

  function expireMatched() {
    notices.querySelectorAll(".notice[data-expires-on]").forEach(function (notice) {
      if (matches(notice.getAttribute("data-expires-on"))) { removeNotice(notice); }
    });
  }

  // ---- questions in the modal dialog ----------------------------------------------------------

  function ask(question) {
    var kind = question.getAttribute("data-kind") || "";
    notices.querySelectorAll(".notice[data-kind]").forEach(function (n) {
      if (n !== question && n.getAttribute("data-kind") === kind) { removeNotice(n); }
    });
    var wasOpen = dialog.open;
    dialog.replaceChildren(question);
    dialog.setAttribute("data-kind", kind);
    ["aria-labelledby", "aria-describedby"].forEach(function (name) {
      if (question.hasAttribute(name)) { dialog.setAttribute(name, question.getAttribute(name)); }
      else { dialog.removeAttribute(name); }
    });
    if (!wasOpen) {
      var active = document.activeElement;
      returnFocus = focusable(opener) || (active && active !== document.body ? active : null);
      dialog.showModal();
    }
    var safe = question.querySelector("[data-confirm-cancel]") || question.querySelector("button, a[href]");
    if (safe) { safe.focus(); }
  }

  function closeQuestion() {
    if (canAsk && dialog.open) { dialog.close(); }
  }

  if (canAsk) {
    dialog.addEventListener("close", function () {
      dialog.replaceChildren();
      dialog.removeAttribute("data-kind");
      var back = returnFocus;
      returnFocus = null;
      if (back && back.isConnected) { back.focus(); }
    });

    dialog.addEventListener("click", function (e) {
      var cancel = e.target.closest ? e.target.closest("[data-confirm-cancel]") : null;
      if (cancel) {
        e.preventDefault(); // the link is the way back without JavaScript
        closeQuestion();
      }
    });

    // Esc answers "no" to the question and nothing else hears it (not the page's Stop, not the
    // sidebar's drawer). `cancel` covers the other ways a browser asks a modal to close.
    dialog.addEventListener("cancel", function (e) { e.stopPropagation(); });

    window.addEventListener("keydown", function (e) {
      if (!dialog.open) { return; }
      if (e.key === "Escape" && !e.isComposing) {
        e.preventDefault();
        e.stopImmediatePropagation();
        closeQuestion();
      } else if (e.key === "Tab") {
        keepTabInside(e);
      }
    }, true);
  }

  // The page behind a modal dialog is inert already; this also keeps Tab from leaving the dialog
  // for the browser's own controls.
  function keepTabInside(e) {
    var list = Array.prototype.filter.call(
      dialog.querySelectorAll("a[href], button:not([disabled]), input:not([type=hidden]):not([disabled]), select, textarea, [tabindex]"),
      function (el) { return el.tabIndex >= 0 && el.getClientRects().length > 0; });
    if (!list.length) { return; }
    var first = list[0], last = list[list.length - 1], active = document.activeElement;
    if (e.shiftKey && (active === first || !dialog.contains(active))) {
      e.preventDefault();
      last.focus();
    } else if (!e.shiftKey && (active === last || !dialog.contains(active))) {
      e.preventDefault();
      first.focus();
    }
  }

  // ---- whatever lands ---------------------------------------------------------------------------

  var seen = new WeakSet();

  function sweep() {
    if (canAsk) { notices.querySelectorAll("[data-confirm]").forEach(ask); }
    var fresh = [];
    notices.querySelectorAll(".notice").forEach(function (n) {
      if (!seen.has(n)) { seen.add(n); fresh.push(n); }
    });
    // The latest of each kind stays (notices are appended: the last in the list is the newest).
    var kept = {};
    var all = notices.querySelectorAll(".notice[data-kind]");
    for (var i = all.length - 1; i >= 0; i--) {
      var kind = all[i].getAttribute("data-kind");
      if (kept[kind]) { removeNotice(all[i]); } else { kept[kind] = true; }
    }
    fresh.forEach(function (n) {
      if (!n.isConnected) { return; }
      // The answer to the open question (the switch refused, say) is shown with the dialog closed.
      if (canAsk && dialog.open && dialog.getAttribute("data-kind") === n.getAttribute("data-kind")) { closeQuestion(); }
      var after = Number(n.getAttribute("data-expires-after"));
      if (after > 0) { expireLater(n, after); }
    });
    expireMatched();
  }

  new MutationObserver(sweep).observe(document.body, { childList: true, subtree: true });
  sweep();
})();
