// Conveyor console: live parts, typed confirmations, keyboard shortcuts. No library:
// a page works without this script (forms post, links go), it only adds comfort.
"use strict";

// Every few seconds, fetch this page again and swap in its parts marked data-live
// (matched by id) whose content changed. Nothing is swapped while the operator is at
// work: an input, textarea or select holding the focus (a search being typed), text
// selected anywhere, or a ticked box in the part. Paused while the tab is hidden.
function busyPage() {
  const active = document.activeElement;
  if (active && /^(INPUT|TEXTAREA|SELECT)$/.test(active.tagName)) return true;
  const selection = window.getSelection();
  return Boolean(selection && !selection.isCollapsed && selection.toString());
}

function refreshLive() {
  if (document.hidden || busyPage()) return;
  fetch(location.href, { credentials: "same-origin", headers: { "X-Console-Live": "1" } })
    .then((resp) => (resp.ok && !resp.redirected ? resp.text() : null))
    .then((text) => {
      if (text === null || busyPage()) return;
      const fresh = new DOMParser().parseFromString(text, "text/html");
      for (const part of document.querySelectorAll("[data-live][id]")) {
        const next = fresh.getElementById(part.id);
        if (!next || next.innerHTML === part.dataset.shown) continue;
        if (part.querySelector("input[type=checkbox]:checked")) continue;
        const html = next.innerHTML;
        part.replaceWith(document.adoptNode(next));
        next.dataset.shown = html;
      }
      wire(document);
    })
    .catch(() => {});
}

// A destructive button stays disabled until its form's `confirm` field holds the name
// (or, where a count is offered too, the count).
function wire(root) {
  for (const input of root.querySelectorAll("input[data-confirm]")) {
    const button = input.form && input.form.querySelector("button");
    if (!button || input.dataset.wired) continue;
    input.dataset.wired = "1";
    const wanted = [input.dataset.confirm, input.dataset.confirmAlso].filter(Boolean);
    const check = () => { button.disabled = !wanted.includes(input.value); };
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
      countSelected(box.form);
    });
  }
  // A selection's buttons say how many are ticked; deleting asks first, naming the count.
  for (const form of root.querySelectorAll("form.selection")) {
    if (form.dataset.wired) continue;
    form.dataset.wired = "1";
    form.addEventListener("change", () => countSelected(form));
    countSelected(form);
    const remove = form.querySelector("button[data-delete-selected]");
    if (remove) {
      remove.addEventListener("click", (event) => {
        const n = selectedIn(form);
        const what = n === 1 ? "1 message" : `${n} messages`;
        if (!window.confirm(`Delete ${what}? This cannot be undone.`)) event.preventDefault();
      });
    }
  }
}

function selectedIn(form) {
  return form.querySelectorAll("input[type=checkbox][name^='m.']:checked").length;
}

function countSelected(form) {
  const n = selectedIn(form);
  for (const out of form.querySelectorAll("[data-selected-count]")) {
    out.textContent = `${n} selected`;
  }
  for (const button of form.querySelectorAll("button[data-needs-selection]")) {
    button.disabled = n === 0;
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
  for (const part of document.querySelectorAll("[data-live][id]")) {
    part.dataset.shown = part.innerHTML;
  }
  wire(document);
  const every = Number(document.body.dataset.liveEvery || 0);
  if (every > 0) setInterval(refreshLive, every * 1000);
});
