// Shared by every view (prepended to each view's module by esm.py: anywidget modules are one
// file each, and a URL import would break offline use).

function h(tag, attrs = {}, children = []) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "text") node.textContent = v;
    else if (k === "class") node.className = v;
    else node.setAttribute(k, v);
  }
  for (const c of children) node.append(c);
  return node;
}

function formatNs(ns) {
  const a = Math.abs(ns);
  if (a < 1e3) return `${ns.toFixed(0)} ns`;
  if (a < 1e6) return `${(ns / 1e3).toFixed(a < 1e4 ? 3 : 1)} µs`;
  if (a < 1e9) return `${(ns / 1e6).toFixed(3)} ms`;
  return `${(ns / 1e9).toFixed(3)} s`;
}

// Scroll `container` (not the page) so that `child` is in the middle of it.
function scrollWithin(container, child) {
  if (!child) return;
  const top = child.offsetTop - container.clientHeight / 2 + child.clientHeight / 2;
  container.scrollTop = Math.max(top, 0);
}

// A value made safe for a CSS selector: `_static_id` comes from the saved widget state, which a
// shared notebook can set to anything (a quote would break out of the attribute selector).
// CSS.escape where the browser has it; else escape every character that is not [A-Za-z0-9_-].
function cssEscape(value) {
  const text = String(value);
  if (typeof CSS !== "undefined" && typeof CSS.escape === "function") return CSS.escape(text);
  return text.replace(/[^A-Za-z0-9_-]/gu, (c) => `\\${c.codePointAt(0).toString(16)} `);
}

// The static rendering of this view was displayed as its own output just before the widget
// (so a saved notebook shows it without a kernel), followed by its pictures, each an image
// output of its own (data-mgl-static-pictures says how many). While the live view is up, hide
// them: the whole outputs in JupyterLab / Notebook 7, the rendering itself elsewhere. Returns
// the undo.
function hideStaticTwin(model) {
  const id = model.get("_static_id");
  const hidden = [];
  const hide = (box) => {
    if (box.style.display !== "none") { box.style.display = "none"; hidden.push(box); }
  };
  if (id) {
    for (const node of document.querySelectorAll(`[data-mgl-static="${cssEscape(id)}"]`)) {
      const box = node.closest(".jp-OutputArea-child");
      if (!box) { hide(node); continue; }
      hide(box);
      let next = box.nextElementSibling;
      for (let k = Number(node.getAttribute("data-mgl-static-pictures")) || 0; k > 0 && next; k--) {
        if (!next.querySelector(".jp-RenderedImage")) break;
        hide(next);
        next = next.nextElementSibling;
      }
    }
  }
  return () => { for (const box of hidden) box.style.display = ""; };
}

// Views of one kernel talk through window events (a timeline slice selects its region's
// source lines in the SASS view of the same kernel).
const MGL_REGION_EVENT = "mgl-region-select";
