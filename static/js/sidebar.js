// The conversation sidebar's behaviour. Loaded as a file, never inline (the pages run under a
// content-security policy without 'unsafe-inline'); the requests themselves are htmx's.
//
// - Wide screens: the Conversations button collapses and expands the column (remembered in this
//   browser). Below 900 px the sidebar is a drawer: the button opens it and focus moves into it;
//   Esc, the close button or a tap beside it closes it and focus returns to the button.
// - Rename in place (a row's Rename, or the one beside the page's heading): Enter or leaving the
//   field saves, Esc cancels; a refused title keeps the old one and says why.
// - Delete asks first, in the row; Esc or "Keep it" takes the question back.
// - A new title (this page's, another tab's, or the one made after the first reply) shows in the
//   heading, the browser tab and every row of the conversation.
// - A tab that becomes visible again reloads the list, so titles renamed elsewhere show.
(function () {
  "use strict";

  var wrap = document.getElementById("sidebar-wrap");
  if (!wrap) { return; }
  var nav = document.getElementById("sidebar");
  var toggle = document.getElementById("sidebar-toggle");
  var closeButton = document.getElementById("sidebar-close");
  var backdrop = document.getElementById("sidebar-backdrop");
  var layout = wrap.parentElement;
  var narrow = window.matchMedia("(max-width: 899.98px)");
  var roomy = window.matchMedia("(min-width: 1200px)");
  var STORE = "hermes.sidebar.collapsed";
  var current = wrap.dataset.current || "";
  var focusAfterSwap = null; // {row: id, what: "auto" | "keep" | "neighbour", neighbour: id}

  wrap.classList.add("js-sidebar");
  toggle.hidden = false;
  closeButton.hidden = false;

  // ---- collapse (wide) and drawer (narrow) ------------------------------------------------

  function stored() {
    try { return window.localStorage.getItem(STORE); } catch (err) { return null; }
  }

  function store(collapsed) {
    try { window.localStorage.setItem(STORE, collapsed ? "1" : "0"); } catch (err) { /* private mode */ }
  }

  function isOpen() { return wrap.classList.contains("open"); }

  function setCollapsed(collapsed) {
    wrap.classList.toggle("collapsed", collapsed);
    if (layout) { layout.classList.toggle("sidebar-collapsed", collapsed); }
    toggle.setAttribute("aria-expanded", collapsed ? "false" : "true");
  }

  function openDrawer() {
    wrap.classList.add("open");
    backdrop.hidden = false;
    toggle.setAttribute("aria-expanded", "true");
    // After the drawer became visible: a hidden element cannot take the focus.
    window.requestAnimationFrame(function () { closeButton.focus(); });
  }

  function closeDrawer(returnFocus) {
    if (!isOpen()) { return; }
    wrap.classList.remove("open");
    backdrop.hidden = true;
    toggle.setAttribute("aria-expanded", "false");
    if (returnFocus) { toggle.focus(); }
  }

  function applyMode() {
    wrap.classList.remove("open");
    backdrop.hidden = true;
    if (narrow.matches) {
      wrap.classList.add("drawer");
      wrap.classList.remove("collapsed");
      if (layout) { layout.classList.remove("sidebar-collapsed"); }
      toggle.setAttribute("aria-expanded", "false");
    } else {
      wrap.classList.remove("drawer");
      var choice = stored();
      setCollapsed(choice === null ? !roomy.matches : choice === "1");
    }
  }

  toggle.addEventListener("click", function () {
    if (narrow.matches) {
      if (isOpen()) { closeDrawer(true); } else { openDrawer(); }
      return;
    }
    var collapsed = !wrap.classList.contains("collapsed");
    setCollapsed(collapsed);
    store(collapsed);
  });
  closeButton.addEventListener("click", function () { closeDrawer(true); });
  backdrop.addEventListener("click", function () { closeDrawer(true); });

  function onModeChange() { applyMode(); }
  if (narrow.addEventListener) { narrow.addEventListener("change", onModeChange); } else { narrow.addListener(onModeChange); }
  applyMode();

  // Tab stays inside the open drawer.
  nav.addEventListener("keydown", function (e) {
    if (e.key !== "Tab" || !isOpen()) { return; }
    var focusable = Array.prototype.filter.call(
      nav.querySelectorAll("a[href], button:not([disabled]), input:not([type=hidden]), [tabindex]:not([tabindex='-1'])"),
      function (el) { return el.offsetParent !== null; });
    if (!focusable.length) { return; }
    var first = focusable[0], last = focusable[focusable.length - 1];
    if (e.shiftKey && document.activeElement === first) { e.preventDefault(); last.focus(); }
    else if (!e.shiftKey && document.activeElement === last) { e.preventDefault(); first.focus(); }
  });

  // ---- titles -------------------------------------------------------------------------------

  var heading = document.getElementById("conversation-title");
  var pageTitleSuffix = " · Hermes Web";

  function showTitle(id, title) {
    document.querySelectorAll("[data-title-for='" + id + "']").forEach(function (el) { el.textContent = title; });
    if (id === current && heading) {
      heading.textContent = title;
      document.title = title + pageTitleSuffix;
    }
  }

  // A pushed title replaces the heading's text (an out-of-band swap): the tab follows it.
  if (heading) {
    new MutationObserver(function () {
      document.title = heading.textContent + pageTitleSuffix;
    }).observe(heading, { childList: true, characterData: true, subtree: true });
  }

  document.body.addEventListener("titleChanged", function (e) {
    var d = e.detail || {};
    if (d.id && typeof d.title === "string") { showTitle(d.id, d.title); }
    if (d.id === current && headingEditor) { closeHeadingEditor(headingEditor.contains(document.activeElement)); }
  });

  // ---- rename in a row --------------------------------------------------------------------

  function rowOf(el) { return el && el.closest ? el.closest(".sidebar-row") : null; }

  // The row comes back by asking for it directly: the Cancel button of a row htmx swapped in is
  // only wired up once the swap settles (20 ms later), and an Esc in between must not be lost.
  function cancelRowRename(form) {
    form.dataset.cancelled = "1";
    var cancel = form.querySelector(".rename-cancel");
    if (!cancel) { return; }
    htmx.ajax("GET", cancel.getAttribute("hx-get"),
              { source: cancel, target: cancel.getAttribute("hx-target"), swap: "outerHTML" });
  }

  wrap.addEventListener("focusout", function (e) {
    var input = e.target;
    if (!input.classList || !input.classList.contains("rename-input")) { return; }
    var form = input.form;
    if (!form || form.dataset.cancelled || form.dataset.sending) { return; }
    if (e.relatedTarget && form.contains(e.relatedTarget)) { return; } // Save or Cancel takes it from here
    if (input.value === input.dataset.original) { cancelRowRename(form); return; }
    htmx.trigger(form, "submit");
  });

  // ---- rename on the page's heading -------------------------------------------------------

  var renameUrl = wrap.dataset.renameUrl;
  var headingButton = null;
  var headingEditor = null;

  function closeHeadingEditor(returnFocus) {
    if (!headingEditor) { return; }
    var editor = headingEditor;
    headingEditor = null; // first: removing the field may fire its blur
    editor.remove();
    heading.hidden = false;
    if (headingButton) {
      headingButton.hidden = false;
      if (returnFocus) { headingButton.focus(); }
    }
  }

  function openHeadingEditor() {
    if (headingEditor) { return; }
    var form = document.createElement("form");
    form.className = "title-rename";
    form.id = "title-rename-form";
    form.setAttribute("method", "post");
    form.setAttribute("action", renameUrl);
    form.setAttribute("hx-post", renameUrl);
    form.setAttribute("hx-swap", "none");
    var place = document.createElement("input");
    place.type = "hidden";
    place.name = "place";
    place.value = "heading";
    var label = document.createElement("label");
    label.className = "sr-only";
    label.htmlFor = "title-rename-input";
    label.textContent = "Title of this conversation (Enter saves, Escape cancels)";
    var input = document.createElement("input");
    input.id = "title-rename-input";
    input.className = "title-rename-input";
    input.name = "title";
    input.autocomplete = "off";
    input.value = heading.textContent.trim();
    input.dataset.original = input.value;
    input.setAttribute("aria-describedby", "title-rename-error");
    var error = document.createElement("p");
    error.id = "title-rename-error";
    error.className = "rename-error";
    error.setAttribute("role", "alert");
    form.append(place, label, input, error);
    heading.hidden = true;
    headingButton.hidden = true;
    heading.insertAdjacentElement("afterend", form);
    headingEditor = form;
    htmx.process(form);
    input.addEventListener("input", function () { input.removeAttribute("aria-invalid"); });
    input.addEventListener("blur", function () {
      if (!headingEditor || form.dataset.sending) { return; }
      if (input.value === input.dataset.original) { closeHeadingEditor(false); return; }
      htmx.trigger(form, "submit");
    });
    input.focus();
    input.select();
  }

  if (heading && renameUrl) {
    headingButton = document.createElement("button");
    headingButton.type = "button";
    headingButton.className = "link title-rename-button";
    headingButton.id = "title-rename-button";
    headingButton.textContent = "Rename";
    headingButton.setAttribute("aria-describedby", "conversation-title");
    heading.insertAdjacentElement("afterend", headingButton);
    headingButton.addEventListener("click", openHeadingEditor);
  }

  // ---- delete in a row --------------------------------------------------------------------

  function cancelDelete(confirmBox) {
    var row = rowOf(confirmBox);
    confirmBox.innerHTML = "";
    var button = row && row.querySelector(".delete-button");
    if (button) { button.focus(); }
  }

  wrap.addEventListener("click", function (e) {
    var keep = e.target.closest ? e.target.closest(".delete-cancel") : null;
    if (keep) { cancelDelete(keep.closest(".sidebar-confirm")); }
  });

  // ---- Escape: the innermost open thing first; never also the running turn's Stop ----------

  window.addEventListener("keydown", function (e) {
    if (e.key !== "Escape" || e.isComposing) { return; }
    var active = document.activeElement;
    var handled = false;
    if (headingEditor && headingEditor.contains(active)) {
      closeHeadingEditor(true);
      handled = true;
    } else if (active && active.classList && active.classList.contains("rename-input") && wrap.contains(active)) {
      cancelRowRename(active.form);
      handled = true;
    } else if (active && active.closest && active.closest(".sidebar-confirm") && wrap.contains(active)) {
      cancelDelete(active.closest(".sidebar-confirm"));
      handled = true;
    } else if (wrap.querySelector(".sidebar-row.editing form.rename-form")) {
      // A row being renamed is still the innermost open thing when its field lost the focus
      // (its answer replaced it, say): Esc cancels that rename rather than closing the drawer.
      cancelRowRename(wrap.querySelector(".sidebar-row.editing form.rename-form"));
      handled = true;
    } else if (isOpen()) {
      closeDrawer(true);
      handled = true;
    }
    if (handled) {
      e.preventDefault();
      e.stopPropagation();
    }
  }, true);

  // ---- focus across swaps, errors ---------------------------------------------------------

  // What the keyboard user acted on keeps the focus when htmx replaces it: the title field when
  // a rename opens, the Rename button when it closes, "Keep it" when a delete asks, the next
  // conversation once one is deleted. Nothing moves when the focus had already left (a save by
  // leaving the field).
  document.body.addEventListener("htmx:beforeRequest", function (e) {
    var elt = e.detail.elt;
    if (!elt || !elt.closest) { return; }
    var form = elt.closest("form");
    if (form && (form.classList.contains("rename-form") || form.classList.contains("title-rename"))) {
      form.dataset.sending = "1";
    }
    var row = rowOf(elt);
    if (!row || !wrap.contains(row) || !row.contains(document.activeElement)) { return; }
    var id = row.dataset.conversation;
    if (form && form.classList.contains("delete-confirm")) {
      var next = row.nextElementSibling || row.previousElementSibling;
      focusAfterSwap = { row: id, what: "neighbour", neighbour: next ? next.dataset.conversation : null };
    } else if (form && form.classList.contains("delete-open")) {
      focusAfterSwap = { row: id, what: "keep" };
    } else {
      focusAfterSwap = { row: id, what: "auto" };
    }
  });

  document.body.addEventListener("htmx:afterRequest", function (e) {
    var form = e.detail.elt && e.detail.elt.closest ? e.detail.elt.closest("form") : null;
    if (form) { delete form.dataset.sending; }
    var status = e.detail.xhr ? e.detail.xhr.status : 0;
    if (form && form.classList.contains("title-rename") && status === 422) {
      var input = form.querySelector("input[name=title]");
      if (input) { input.setAttribute("aria-invalid", "true"); }
    }
    var mine = wrap.contains(e.detail.elt) || (form && form.classList.contains("title-rename"));
    if (!e.detail.successful && status !== 422 && mine) {
      var line = document.getElementById("sidebar-status");
      if (line) { line.textContent = "That did not work (" + (status || "no answer") + "); reload the page and try again."; }
    }
  });

  document.body.addEventListener("htmx:afterSettle", function (e) {
    var want = focusAfterSwap;
    if (!want || !e.detail.xhr) { return; } // a pushed fragment settling is not the answer awaited
    focusAfterSwap = null;
    var row = document.getElementById("sidebar-row-" + want.row);
    var target = null;
    if (want.what === "neighbour") {
      var other = want.neighbour && document.getElementById("sidebar-row-" + want.neighbour);
      target = other ? other.querySelector(".sidebar-link") : document.getElementById("sidebar-q");
    } else if (row && want.what === "keep") {
      target = row.querySelector(".delete-cancel");
    } else if (row) {
      target = row.querySelector(row.classList.contains("editing") ? ".rename-input" : ".rename-button");
    }
    if (target) {
      target.focus();
      if (target.classList.contains("rename-input")) { target.select(); }
    }
  });

  // ---- the list again when the tab comes back ---------------------------------------------

  var search = document.getElementById("sidebar-q");
  document.addEventListener("visibilitychange", function () {
    if (document.visibilityState !== "visible" || (search && search.value.trim())) { return; }
    if (wrap.querySelector(".sidebar-row.editing, .sidebar-confirm:not(:empty)")) { return; }
    if (nav.contains(document.activeElement)) { return; }
    var form = document.getElementById("sidebar-search");
    if (form) { htmx.trigger(form, "submit"); }
  });
})();
