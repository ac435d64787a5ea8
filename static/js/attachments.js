// Attachments in the composer. Loaded as a file, never inline (the page's content-security policy).
//
// - Three ways in: the "Attach files" button (a file picker), files dropped on the conversation,
//   and an image pasted into the page (a paste that also holds text pastes the text). Several
//   files per message.
// - Each file is a chip (name, size, a thumbnail for an image once stored) with the progress of its
//   upload and a button that removes it (aborts the upload, or deletes the stored pending file).
// - A refused file names its reason beside the composer and leaves its chip out; the typed text
//   is never touched. Files dropped anywhere else on the page are ignored rather than opened (which
//   would leave the page and lose the text).
// - A ready chip adds an `attachments` id to the send form; a message with attachments may have
//   no text. Sending waits until every upload finished. An accepted send (2xx) clears the chips;
//   a refused one keeps them.
// - After a reload the files uploaded but not sent come back as chips (the server keeps them for a
//   day, then removes them).
(function () {
  "use strict";

  var composer = document.getElementById("composer");
  var input = document.getElementById("attachment-input");
  var button = document.getElementById("attach-button");
  var list = document.getElementById("attachment-list");
  var box = document.getElementById("composer-attachments");
  var textarea = document.getElementById("composer-text");
  var errorBox = document.getElementById("composer-error");
  var dropZone = document.querySelector(".conversation .chat");
  if (!composer || !input || !list || !composer.dataset.attachmentsUrl) { return; }

  var url = composer.dataset.attachmentsUrl;
  var limits = { maxBytes: 0, perMessage: 0 };

  function csrfToken() {
    try { return JSON.parse(document.body.getAttribute("hx-headers") || "{}")["X-CSRFToken"] || ""; }
    catch (err) { return ""; }
  }

  function humanSize(n) {
    if (n < 1024) { return n + " bytes"; }
    var units = ["KB", "MB", "GB"];
    for (var i = 0; i < units.length; i++) {
      n /= 1024;
      if (n < 1024 || i === units.length - 1) { return n.toFixed(1) + " " + units[i]; }
    }
    return "";
  }

  function chips(state) {
    return list.querySelectorAll(".attachment-chip" + (state ? "[data-state=" + state + "]" : ""));
  }

  // The list shows only when it holds something; with a ready file the text may stay empty.
  function sync() {
    box.hidden = chips().length === 0;
    if (chips("ready").length) { textarea.removeAttribute("required"); }
    else { textarea.setAttribute("required", ""); }
  }

  function showError(text) {
    if (!errorBox) { return; }
    var p = document.createElement("p");
    p.className = "notice error";
    p.setAttribute("role", "alert");
    p.dataset.event = "attachment-refused";
    var span = document.createElement("span");
    span.className = "notice-text";
    span.textContent = text;
    var dismiss = document.createElement("button");
    dismiss.type = "button";
    dismiss.className = "dismiss link";
    dismiss.setAttribute("aria-label", "Dismiss this notice");
    dismiss.textContent = "×";
    p.appendChild(span);
    p.appendChild(document.createTextNode(" "));
    p.appendChild(dismiss);
    errorBox.appendChild(p);
  }

  // The server's reason: its JSON `error`, or the text of an HTML notice (the request-size guard).
  function reasonOf(xhr) {
    var body = xhr.responseText || "";
    try { return JSON.parse(body).error || ""; } catch (err) { /* not JSON */ }
    var doc = new DOMParser().parseFromString(body, "text/html");
    var text = doc.querySelector(".notice-text") || doc.body;
    return (text ? text.textContent : "").replace(/\s+/g, " ").trim();
  }

  function el(tag, className, text) {
    var node = document.createElement(tag);
    if (className) { node.className = className; }
    if (text !== undefined) { node.textContent = text; }
    return node;
  }

  function makeChip(name, size) {
    var chip = el("li", "attachment-chip");
    chip.dataset.state = "uploading";
    chip.appendChild(el("span", "attachment-icon"));
    var label = el("span", "attachment-label");
    label.appendChild(el("span", "attachment-name", name));
    label.appendChild(el("span", "attachment-size", humanSize(size)));
    chip.appendChild(label);
    var progress = el("progress", "attachment-progress");
    progress.max = 100;
    progress.value = 0;
    progress.setAttribute("aria-label", "Uploading " + name);
    chip.appendChild(progress);
    var remove = el("button", "link attachment-remove", "×");
    remove.type = "button";
    remove.setAttribute("aria-label", "Remove " + name);
    remove.title = "Remove " + name;
    chip.appendChild(remove);
    list.appendChild(chip);
    sync();
    return chip;
  }

  // A stored file: its id goes with the form, its thumbnail replaces the icon.
  function chipReady(chip, data) {
    chip.dataset.state = "ready";
    chip.dataset.id = data.id;
    chip.dataset.kind = data.kind;
    chip.querySelector(".attachment-name").textContent = data.name;
    chip.querySelector(".attachment-size").textContent = data.size_label;
    var progress = chip.querySelector("progress");
    if (progress) { progress.remove(); }
    if (data.thumbnail_url) {
      var img = el("img", "attachment-thumb");
      img.src = data.thumbnail_url;
      img.alt = "";
      chip.replaceChild(img, chip.querySelector(".attachment-icon"));
    }
    if (data.note) { chip.querySelector(".attachment-label").appendChild(el("span", "attachment-note", data.note)); }
    chip.querySelector(".attachment-remove").setAttribute("aria-label", "Remove " + data.name);
    var field = el("input");
    field.type = "hidden";
    field.name = "attachments";
    field.value = data.id;
    chip.appendChild(field);
    sync();
  }

  function upload(file, name) {
    var chip = makeChip(name, file.size);
    var form = new FormData();
    form.append("file", file, name);
    form.append("name", name);
    var xhr = new XMLHttpRequest();
    chip._xhr = xhr;
    xhr.open("POST", url);
    xhr.setRequestHeader("X-CSRFToken", csrfToken());
    xhr.upload.addEventListener("progress", function (e) {
      var progress = chip.querySelector("progress");
      if (progress && e.lengthComputable) { progress.value = Math.round(100 * e.loaded / e.total); }
    });
    xhr.addEventListener("load", function () {
      chip._xhr = null;
      if (xhr.status === 201) {
        try { chipReady(chip, JSON.parse(xhr.responseText)); return; } catch (err) { /* fall through */ }
      }
      chip.remove();
      sync();
      var reason = reasonOf(xhr) || ("the server answered " + xhr.status);
      showError(reason.indexOf(name) >= 0 ? reason : "“" + name + "” was not attached: " + reason);
    });
    xhr.addEventListener("error", function () {
      chip._xhr = null;
      chip.remove();
      sync();
      showError("“" + name + "” was not attached: the server could not be reached. Try again.");
    });
    xhr.send(form);
  }

  function pad(n) { return (n < 10 ? "0" : "") + n; }

  // A pasted screenshot arrives as "image.png": give it a name that says what it was.
  function pastedName(file) {
    if (file.name && file.name !== "image.png" && file.name !== "image") { return file.name; }
    var d = new Date();
    var ext = (file.type.split("/")[1] || "png").replace("jpeg", "jpg");
    return "pasted-image-" + d.getFullYear() + pad(d.getMonth() + 1) + pad(d.getDate()) + "-" +
      pad(d.getHours()) + pad(d.getMinutes()) + pad(d.getSeconds()) + "." + ext;
  }

  function addFiles(files, pasted) {
    Array.prototype.forEach.call(files, function (file) {
      var name = pasted ? pastedName(file) : file.name;
      if (limits.perMessage && chips().length >= limits.perMessage) {
        showError("“" + name + "” was not attached: a message may carry at most " + limits.perMessage +
                  " attachments. Remove one first.");
      } else if (limits.maxBytes && file.size > limits.maxBytes) {
        showError("“" + name + "” was not attached: it is " + humanSize(file.size) + "; a file may be at most " +
                  humanSize(limits.maxBytes) + ".");
      } else if (!file.size) {
        showError("“" + name + "” was not attached: it is empty.");
      } else {
        upload(file, name);
      }
    });
  }

  // ---- the three ways in ------------------------------------------------------------------

  if (button) { button.addEventListener("click", function () { input.click(); }); }
  input.addEventListener("change", function () {
    addFiles(input.files, false);
    input.value = "";
  });

  function hasFiles(e) {
    var types = e.dataTransfer ? e.dataTransfer.types : null;
    return !!types && Array.prototype.indexOf.call(types, "Files") >= 0;
  }

  var depth = 0;
  if (dropZone) {
    dropZone.addEventListener("dragenter", function (e) {
      if (!hasFiles(e)) { return; }
      depth += 1;
      dropZone.classList.add("drop-active");
    });
    dropZone.addEventListener("dragleave", function (e) {
      if (!hasFiles(e)) { return; }
      depth = Math.max(0, depth - 1);
      if (!depth) { dropZone.classList.remove("drop-active"); }
    });
    dropZone.addEventListener("drop", function (e) {
      depth = 0;
      dropZone.classList.remove("drop-active");
      if (!e.dataTransfer || !e.dataTransfer.files || !e.dataTransfer.files.length) { return; }
      e.preventDefault();
      addFiles(e.dataTransfer.files, false);
      textarea.focus();
    });
  }
  // Anywhere on the page, a dropped file must not replace the page.
  document.addEventListener("dragover", function (e) {
    if (hasFiles(e)) {
      e.preventDefault();
      e.dataTransfer.dropEffect = dropZone && dropZone.contains(e.target) ? "copy" : "none";
    }
  });
  document.addEventListener("drop", function (e) { if (hasFiles(e)) { e.preventDefault(); } });

  document.addEventListener("paste", function (e) {
    var data = e.clipboardData;
    if (!data || !data.files || !data.files.length) { return; }
    // Copied cells or text often come with a picture of themselves: the text is what was meant.
    if (data.getData("text/plain")) { return; }
    var target = e.target;
    var editable = target && (target.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(target.tagName));
    if (editable && target !== textarea) { return; } // another field: not ours
    e.preventDefault();
    addFiles(data.files, true);
  });

  // ---- remove, send ---------------------------------------------------------------------------

  list.addEventListener("click", function (e) {
    var remove = e.target.closest ? e.target.closest(".attachment-remove") : null;
    if (!remove) { return; }
    var chip = remove.closest(".attachment-chip");
    if (chip._xhr) {
      chip._xhr.abort();
      chip.remove();
      sync();
      return;
    }
    if (!chip.dataset.id) { chip.remove(); sync(); return; }
    remove.disabled = true;
    fetch(url + "/" + chip.dataset.id, { method: "DELETE", credentials: "same-origin",
                                         headers: { "X-CSRFToken": csrfToken() } })
      .then(function (response) {
        if (response.ok || response.status === 404) {
          chip.remove();
          sync();
          textarea.focus();
          return;
        }
        remove.disabled = false;
        return response.json().then(function (body) { showError(body.error || "The file could not be removed."); });
      })
      .catch(function () {
        remove.disabled = false;
        showError("The file could not be removed: the server could not be reached.");
      });
  });

  // A message with files but no text is sent by Enter too (conversation.js sends only text).
  textarea.addEventListener("keydown", function (e) {
    if (e.key === "Enter" && !e.shiftKey && !e.isComposing && !textarea.value.trim() && chips("ready").length &&
        !chips("uploading").length) {
      e.preventDefault();
      htmx.trigger(composer, "submit");
    }
  });

  composer.addEventListener("htmx:beforeRequest", function (e) {
    if (e.detail.elt !== composer || !chips("uploading").length) { return; }
    e.preventDefault();
    showError("Wait until the files have finished uploading (or remove them), then send.");
  });

  composer.addEventListener("htmx:afterRequest", function (e) {
    if (e.detail.elt !== composer) { return; }
    var status = e.detail.xhr ? e.detail.xhr.status : 0;
    if (status >= 200 && status < 300) {
      chips("ready").forEach(function (chip) { chip.remove(); });
      sync();
    }
  });

  // ---- what was uploaded before a reload --------------------------------------------------------

  fetch(url, { credentials: "same-origin", headers: { "Accept": "application/json" } })
    .then(function (response) { return response.ok ? response.json() : null; })
    .then(function (body) {
      if (!body) { return; }
      limits.maxBytes = body.max_bytes || 0;
      limits.perMessage = body.per_message || 0;
      (body.attachments || []).forEach(function (data) {
        if (list.querySelector(".attachment-chip[data-id='" + data.id + "']")) { return; }
        chipReady(makeChip(data.name, data.size), data);
      });
    })
    .catch(function () { /* the composer works without the list; uploads still say their own errors */ });
})();
