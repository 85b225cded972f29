// IR view (anywidget ESM): the pass list on the left; on the right the module after the
// selected pass or its diff against the previous pass, whichever Python sends as `content`.

const DIFF_CLASS = { add: "mgl-diff-add", del: "mgl-diff-del", hunk: "mgl-diff-hunk", ctx: "", text: "" };
const DIFF_MARK = { add: "+", del: "-", hunk: "", ctx: " ", text: "" };

function render({ model, el }) {
  const passes = model.get("passes");
  const root = h("div", { class: "mgl mgl-ir" });
  const moduleBtn = h("button", { class: "mgl-btn mgl-ir-module", text: "module after pass" });
  const diffBtn = h("button", { class: "mgl-btn mgl-ir-diff", text: "diff vs previous" });
  const changedOnly = h("input", { type: "checkbox", class: "mgl-ir-changed-only" });
  const status = h("span", { class: "mgl-status mgl-ir-status" });
  const toolbar = h("div", { class: "mgl-toolbar" }, [
    h("span", { class: "mgl-title", text: `IR: ${model.get("title")}` }),
    moduleBtn, diffBtn,
    h("label", {}, [changedOnly, " hide unchanged passes"]),
    status,
  ]);
  const list = h("ul", { class: "mgl-ir-passes" });
  const code = h("div", { class: "mgl-code mgl-ir-content" });
  const height = model.get("height");
  list.style.height = `${height}px`;
  code.style.height = `${height}px`;
  root.append(toolbar, h("div", { class: "mgl-ir-main" }, [list, code]));
  el.append(root);

  const items = passes.map((p, i) => {
    const stat = p.changed ? `+${p.added} −${p.removed}` : "unchanged";
    const li = h("li", { class: p.changed ? "mgl-ir-pass" : "mgl-ir-pass mgl-unchanged", "data-index": String(i), title: `${p.lines} lines after this pass` }, [
      h("span", { class: "mgl-ir-stat", text: stat }),
      `${i}. ${p.name}`,
    ]);
    li.addEventListener("click", () => { model.set("selected", i); model.save_changes(); });
    list.append(li);
    return li;
  });
  if (!passes.length) code.append(h("div", { class: "mgl-status", text: "no passes recorded: compile with pass dumps enabled" }));

  moduleBtn.addEventListener("click", () => { model.set("mode", "module"); model.save_changes(); });
  diffBtn.addEventListener("click", () => { model.set("mode", "diff"); model.save_changes(); });
  changedOnly.addEventListener("change", () => {
    items.forEach((li, i) => { li.style.display = changedOnly.checked && !passes[i].changed ? "none" : ""; });
  });

  function renderContent() {
    const sel = model.get("selected");
    const mode = model.get("mode");
    items.forEach((li, i) => li.classList.toggle("mgl-selected", i === sel));
    moduleBtn.classList.toggle("mgl-active", mode === "module");
    diffBtn.classList.toggle("mgl-active", mode === "diff");
    const lines = model.get("content");
    const p = passes[sel];
    if (p) {
      status.textContent = mode === "diff"
        ? (p.changed ? `${p.name}: +${p.added} −${p.removed} lines` : `${p.name} changed nothing`)
        : `module after ${p.name}: ${p.lines} lines`;
    }
    const digits = String(lines.length).length;
    code.replaceChildren(...lines.map(([kind, text], i) => {
      const row = h("div", { class: `mgl-code-line mgl-nocode ${DIFF_CLASS[kind] || ""}` });
      if (kind === "text") row.append(h("span", { class: "mgl-lineno", text: String(i + 1).padStart(digits) }));
      row.append(DIFF_MARK[kind] + text);
      return row;
    }));
    if (mode === "diff" && p && !p.changed) code.append(h("div", { class: "mgl-status", text: "(no change)" }));
    code.scrollTop = 0;
  }

  renderContent();
  model.on("change:content", renderContent);
  model.on("change:mode", renderContent);
  model.on("change:selected", renderContent);
  const showStatic = hideStaticTwin(model);
  return () => {
    showStatic();
    model.off("change:content", renderContent);
    model.off("change:mode", renderContent);
    model.off("change:selected", renderContent);
  };
}

export default { render };
