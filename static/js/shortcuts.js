// The keyboard shortcuts list (#shortcuts, an HTML popover: its button opens it and Esc closes it
// even without this script). This adds the `?` key outside text fields, moves the focus into
// the list when it opens and gives it back to where it was when it closes.
(function () {
  "use strict";

  var list = document.getElementById("shortcuts");
  if (!list || typeof list.showPopover !== "function") { return; }
  var returnTo = null;

  function typing(el) {
    if (!el || el === document.body) { return false; }
    var tag = el.tagName;
    return tag === "TEXTAREA" || tag === "SELECT" || el.isContentEditable ||
      (tag === "INPUT" && !/^(button|submit|reset|checkbox|radio|range|color|file|image)$/i.test(el.type));
  }

  function isOpen() {
    try { return list.matches(":popover-open"); } catch (err) { return false; }
  }

  list.addEventListener("beforetoggle", function (e) {
    if (e.newState === "open") { returnTo = document.activeElement; }
  });

  list.addEventListener("toggle", function (e) {
    if (e.newState === "open") {
      var close = list.querySelector(".close");
      if (close) { close.focus(); }
    } else if (returnTo && document.contains(returnTo) &&
               (document.activeElement === document.body || list.contains(document.activeElement))) {
      returnTo.focus();
      returnTo = null;
    }
  });

  document.addEventListener("keydown", function (e) {
    if (e.key !== "?" || e.ctrlKey || e.metaKey || e.altKey || e.isComposing || typing(e.target)) { return; }
    e.preventDefault();
    if (!isOpen()) { list.showPopover(); }
  });
})();
