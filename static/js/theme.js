// The colour theme toggle in the top bar (Auto / Light / Dark). Loaded as a file, never inline
// (the pages run under a content-security policy without 'unsafe-inline').
//
// Without this script the toggle is a plain form post and the next page renders in the theme.
// With it the page switches at once (<html data-theme>, the buttons' aria-pressed) and the
// choice is saved in the background; if saving fails the page goes back to what was saved.
(function () {
  "use strict";

  var form = document.getElementById("theme-toggle");
  if (!form) { return; }
  var root = document.documentElement;

  function show(theme) {
    root.dataset.theme = theme;
    form.querySelectorAll("button[name=theme]").forEach(function (b) {
      b.setAttribute("aria-pressed", b.value === theme ? "true" : "false");
    });
  }

  form.addEventListener("submit", function (e) {
    var button = e.submitter;
    if (!button || button.name !== "theme" || !window.fetch) { return; }
    e.preventDefault();
    var before = root.dataset.theme || "auto";
    var data = new FormData(form);
    data.set("theme", button.value);
    show(button.value);
    fetch(form.action, { method: "POST", body: data, credentials: "same-origin",
                         headers: { "Accept": "application/json" } })
      .then(function (response) { if (!response.ok) { throw new Error(String(response.status)); } })
      .catch(function () {
        show(before);
        button.title = "Could not save the theme; try again.";
      });
  });
})();
