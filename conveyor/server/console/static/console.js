// Conveyor console: live parts, typed confirmations, keyboard shortcuts. No library:
// a page works without this script (forms post, links go), it only adds comfort.
"use strict";

// Every few seconds, fetch this page again and swap in its parts marked data-live
// (matched by id). A part the operator is using is left alone: one holding the focus
// or a ticked box. Paused while the tab is hidden.
function refreshLive() {
  if (document.hidden) return;
  fetch(location.href, { credentials: "same-origin", headers: { "X-Console-Live": "1" } })
    .then((resp) => (resp.ok && !resp.redirected ? resp.text() : null))
    .then((text) => {
      if (text === null) return;
      const fresh = new DOMParser().parseFromString(text, "text/html");
      for (const part of document.querySelectorAll("[data-live][id]")) {
        const next = fresh.getElementById(part.id);
        const busy = part.contains(document.activeElement) ||
          part.querySelector("input[type=checkbox]:checked");
        if (next && !busy) part.replaceWith(document.adoptNode(next));
      }
      wire(document);
    })
    .catch(() => {});
}

// A destructive button stays disabled until its form's `confirm` field holds the name.
function wire(root) {
  for (const input of root.querySelectorAll("input[data-confirm]")) {
    const button = input.form && input.form.querySelector("button");
    if (!button || input.dataset.wired) continue;
    input.dataset.wired = "1";
    const check = () => { button.disabled = input.value !== input.dataset.confirm; };
    input.addEventListener("input", check);
    check();
  }
  for (const box of root.querySelectorAll("input[data-select-all]")) {
    if (box.dataset.wired) continue;
    box.dataset.wired = "1";
    box.addEventListener("change", () => {
      for (const other of box.form.querySelectorAll("input[type=checkbox][name^='m.']")) {
        other.checked = box.checked;
      }
    });
  }
}

// `/` focuses the page's search box; `g` then `h` goes to the overview.
let pending = "";
document.addEventListener("keydown", (event) => {
  const typing = /^(INPUT|TEXTAREA|SELECT)$/.test(document.activeElement.tagName);
  if (typing || event.ctrlKey || event.metaKey || event.altKey) return;
  const search = document.querySelector("input[type=search]");
  if (event.key === "/" && search) { event.preventDefault(); search.focus(); return; }
  if (pending === "g" && event.key === "h") location.href = "/console";
  pending = event.key;
});

document.addEventListener("DOMContentLoaded", () => {
  wire(document);
  const every = Number(document.body.dataset.liveEvery || 0);
  if (every > 0) setInterval(refreshLive, every * 1000);
});
