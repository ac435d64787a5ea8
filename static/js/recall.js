// Recall pages. Loaded as a file, never inline (the pages run under a content-security policy).
// - An original opened in context scrolls into view and takes the focus.
// - The compression preview says whether the summary was edited, and can go back to the draft.
(function () {
  "use strict";

  var hit = document.querySelector(".recall-hit");
  if (hit) {
    hit.scrollIntoView({ block: "center" });
    hit.focus({ preventScroll: true });
  }

  var summary = document.getElementById("compress-summary");
  var state = document.getElementById("compress-summary-state");
  var reset = document.getElementById("compress-reset-button");
  if (summary && state && reset) {
    var draft = summary.dataset.draft || "";
    var update = function () {
      var edited = summary.value !== draft;
      state.textContent = edited ? "Edited: the divider and the event will say so." : "The model's draft, unedited.";
      reset.hidden = !edited || !draft;
    };
    summary.addEventListener("input", update);
    reset.addEventListener("click", function () { summary.value = draft; update(); summary.focus(); });
    update();
  }
})();
