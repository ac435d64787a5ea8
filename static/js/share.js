// The share panel on the conversation page. Loaded as a file, never inline (the pages run under a
// content-security policy).
// - Copy puts the new link on the clipboard; where the clipboard cannot be written (a page not
//   served over HTTPS, a refused permission) the link is selected for the reader to copy.
// - The new link's field selects its whole text when it takes the focus.
// The panel's parts arrive by htmx swaps, so the handlers listen on the document.
(function () {
  "use strict";

  function selectAll(field) {
    field.focus();
    field.select();
  }

  document.addEventListener("click", function (e) {
    var button = e.target.closest ? e.target.closest("button[data-copy]") : null;
    if (!button) { return; }
    var field = document.getElementById(button.dataset.copy);
    if (!field) { return; }
    var done = function () {
      button.textContent = "Copied";
      setTimeout(function () { button.textContent = "Copy"; }, 1500);
    };
    var fallback = function () {
      selectAll(field);
      button.textContent = "Press Ctrl+C to copy";
    };
    if (navigator.clipboard && navigator.clipboard.writeText && window.isSecureContext) {
      navigator.clipboard.writeText(field.value).then(done, fallback);
    } else {
      fallback();
    }
  });

  document.addEventListener("focusin", function (e) {
    if (e.target.classList && e.target.classList.contains("share-url")) { e.target.select(); }
  });
})();
