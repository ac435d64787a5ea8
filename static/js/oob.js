// Entries pushed over the socket are appended to a container that is always on the page
// (`<div id="transcript" hx-swap-oob="beforeend">`), never swapped by an id the page may not have
// yet: htmx logs an error for every out-of-band fragment without a target. What the old
// "delete it first" fragments bought is kept here: an element arriving with an id already on the
// page (a placeholder the page was served with and is pushed again, an entry re-sent after a
// reconnect) replaces the earlier copy, so no entry is ever shown twice.
//
// Only inserts are touched: a fragment that replaces its target whole (hx-swap-oob="true") carries
// the target's own id and is left to htmx. Runs after conversation.js's own htmx:oobBeforeSwap
// listener (this file is included after it), which carries the open <details> over first.
// Deletes of what the page does not show are left out before htmx sees them (hermes-live below).
(function () {
  "use strict";

  // ---- deletes of what this page does not show -------------------------------------------------

  // A push may delete what this page never showed or already replaced (the placeholder of a
  // stream the page never got, or that a re-sent transcript no longer has). That is a no-op, but
  // htmx logs it as an error: leave such deletes out (the conversation's hx-ext names this
  // extension next to ws).
  htmx.defineExtension("hermes-live", {
    transformResponse: function (text) {
      if (text.indexOf("hx-swap-oob=\"delete\"") < 0) { return text; }
      var template = document.createElement("template");
      template.innerHTML = text;
      var idle = Array.prototype.filter.call(template.content.children, function (el) {
        if (el.getAttribute("hx-swap-oob") !== "delete" || !el.id) { return false; }
        var twins = template.content.querySelectorAll("[id='" + el.id.replace(/'/g, "") + "']").length;
        return !document.getElementById(el.id) && twins === 1;
      });
      if (!idle.length) { return text; }
      idle.forEach(function (el) { el.remove(); });
      return template.innerHTML;
    }
  });

  document.body.addEventListener("htmx:oobBeforeSwap", function (e) {
    var target = e.detail.target, fragment = e.detail.fragment;
    if (!target || !fragment || !fragment.children) { return; }
    Array.prototype.forEach.call(fragment.children, function (el) {
      if (!el.id || el.id === target.id) { return; }
      var earlier = document.getElementById(el.id);
      if (earlier && earlier !== target && !earlier.contains(target)) { earlier.remove(); }
    });
  });
})();
