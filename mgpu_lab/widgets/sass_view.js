// SASS view (anywidget ESM): coloured listing, search, source <-> SASS <-> PTX selection,
// instruction mix and resource report. Tokens and cross references arrive precomputed from
// Python; this file only builds DOM and moves highlight classes around.

function baseName(path) {
  return path.replace(/\\/g, "/").split("/").pop();
}

function render({ model, el }) {
  const root = h("div", { class: "mgl mgl-sass" });
  const search = h("input", { type: "search", class: "mgl-sass-search", placeholder: "search SASS (Enter: next)" });
  search.style.width = "18em";
  const matchLabel = h("span", { class: "mgl-status mgl-sass-matches" });
  const prevBtn = h("button", { class: "mgl-btn", text: "▲", title: "previous match" });
  const nextBtn = h("button", { class: "mgl-btn", text: "▼", title: "next match" });
  const toolbar = h("div", { class: "mgl-toolbar" }, [
    h("span", { class: "mgl-title", text: `SASS: ${model.get("title")}` }), search, prevBtn, nextBtn, matchLabel,
  ]);
  const notes = h("div", { class: "mgl-status" });
  const listing = h("div", { class: "mgl-code mgl-sass-listing" });
  const sourceTitle = h("div", { class: "mgl-panel-title mgl-sass-source-title", text: "Source" });
  const fileSelect = h("select", { class: "mgl-sass-file" });
  const source = h("div", { class: "mgl-code mgl-sass-source" });
  const ptxTitle = h("div", { class: "mgl-panel-title mgl-sass-ptx-title", text: "PTX" });
  const ptx = h("div", { class: "mgl-code mgl-sass-ptx" });
  const side = h("div", { class: "mgl-sass-side" }, [sourceTitle, fileSelect, source, ptxTitle, ptx]);
  const main = h("div", { class: "mgl-sass-main" }, [listing, side]);
  const mix = h("div", { class: "mgl-mix" });
  const resources = h("table", { class: "mgl-table mgl-sass-resources" });
  const opcodeTable = h("table", { class: "mgl-table" });
  const opcodes = h("details", {}, [h("summary", { text: "instructions by opcode" }), opcodeTable]);
  const bottom = h("div", { class: "mgl-toolbar mgl-sass-bottom" }, [
    h("div", {}, [h("div", { class: "mgl-panel-title", text: "Instruction mix" }), mix, opcodes]),
    h("div", {}, [h("div", { class: "mgl-panel-title", text: "Resources" }), resources]),
  ]);
  bottom.style.alignItems = "flex-start";
  bottom.style.gap = "32px";
  root.append(toolbar, notes, main, bottom);
  el.append(root);

  const lines = model.get("lines");
  const isInstruction = model.get("instruction");
  const sassSource = model.get("sass_source");
  const files = model.get("files");
  const fileTexts = model.get("file_texts");
  const keys = model.get("source_keys");
  const keySass = model.get("source_sass");
  const keyPtx = model.get("source_ptx");
  const keyIndex = new Map(keys.map((k, i) => [`${k[0]}:${k[1]}`, i]));
  const height = model.get("height");
  listing.style.height = `${height}px`;
  source.style.height = `${Math.round(height * 0.55)}px`;
  ptx.style.height = `${Math.round(height * 0.3)}px`;
  notes.textContent = model.get("notes").join(" · ");

  // ---- listing ---------------------------------------------------------------------------
  const digits = String(lines.length).length;
  const lineText = [];
  const sassRows = lines.map((tokens, i) => {
    const row = h("div", { class: "mgl-code-line", "data-line": String(i) });
    row.append(h("span", { class: "mgl-lineno", text: String(i + 1).padStart(digits) }));
    let text = "";
    for (const [cls, t] of tokens) {
      row.append(cls ? h("span", { class: `sass-${cls}`, text: t }) : document.createTextNode(t));
      text += t;
    }
    lineText.push(text.toLowerCase());
    if (!sassSource[i]) row.classList.add("mgl-nocode");
    row.addEventListener("click", () => selectSass(i));
    return row;
  });
  listing.append(...sassRows);

  // ---- source ----------------------------------------------------------------------------
  let shownFile = -1;
  let sourceRows = [];
  files.forEach((f, i) => fileSelect.append(h("option", { value: String(i), text: baseName(f) })));
  fileSelect.style.display = files.length > 1 ? "" : "none";
  fileSelect.addEventListener("change", () => showFile(Number(fileSelect.value)));

  function showFile(fileId) {
    if (fileId === shownFile) return;
    shownFile = fileId;
    fileSelect.value = String(fileId);
    const text = fileTexts[fileId] || [];
    const width = String(text.length).length;
    sourceRows = text.map((t, line) => {
      const hasCode = keyIndex.has(`${fileId}:${line}`);
      const row = h("div", { class: hasCode ? "mgl-code-line" : "mgl-code-line mgl-nocode", "data-line": String(line) }, [
        h("span", { class: "mgl-lineno", text: String(line + 1).padStart(width) }),
        t,
      ]);
      if (hasCode) row.addEventListener("click", () => selectSource(fileId, line));
      return row;
    });
    source.replaceChildren(...sourceRows);
    if (!text.length) source.append(h("div", { class: "mgl-status", text: "(source text not available)" }));
  }

  // ---- PTX -------------------------------------------------------------------------------
  const ptxText = model.get("ptx_lines");
  const ptxDigits = String(ptxText.length).length;
  const ptxRows = ptxText.map((t, i) =>
    h("div", { class: "mgl-code-line mgl-nocode", "data-line": String(i) }, [
      h("span", { class: "mgl-lineno", text: String(i + 1).padStart(ptxDigits) }),
      t,
    ]),
  );
  ptx.append(...ptxRows);

  // ---- selection -------------------------------------------------------------------------
  let marked = [];
  function mark(row, cls) {
    if (!row) return;
    row.classList.add(cls);
    marked.push([row, cls]);
  }

  function selectSass(i) {
    model.set("selected_sass", i);
    model.set("selected_source", sassSource[i] ? sassSource[i] : []);
    model.save_changes(); // the change events re-apply the highlights
  }

  function selectSource(fileId, line) {
    model.set("selected_sass", -1);
    model.set("selected_source", [fileId, line]);
    model.save_changes();
  }

  function applySelection(scroll) {
    for (const [row, cls] of marked) row.classList.remove(cls);
    marked = [];
    const sel = model.get("selected_sass");
    const src = model.get("selected_source");
    if (sel >= 0) mark(sassRows[sel], "mgl-selected");
    if (!src || src.length !== 2) {
      sourceTitle.textContent = sel >= 0 ? "Source: (no line info for this instruction)" : "Source";
      ptxTitle.textContent = "PTX";
      return;
    }
    const [fileId, line] = src;
    showFile(fileId);
    const srcRow = sourceRows[line];
    mark(srcRow, "mgl-selected");
    const text = (fileTexts[fileId] || [])[line] || "";
    sourceTitle.textContent = `Source: ${baseName(files[fileId])}:${line + 1}  ${text.trim()}`;
    const k = keyIndex.get(`${fileId}:${line}`);
    const related = k === undefined ? [] : keySass[k];
    const ptxLines = k === undefined ? [] : keyPtx[k];
    for (const s of related) if (s !== sel) mark(sassRows[s], "mgl-related");
    for (const p of ptxLines) mark(ptxRows[p], "mgl-related");
    ptxTitle.textContent = ptxLines.length
      ? `PTX: ${ptxLines.length} line${ptxLines.length > 1 ? "s" : ""} from this source line`
      : "PTX: none from this source line";
    if (scroll) {
      scrollWithin(source, srcRow);
      if (ptxLines.length) scrollWithin(ptx, ptxRows[ptxLines[0]]);
      if (sel < 0 && related.length) scrollWithin(listing, sassRows[related[0]]);
    }
  }

  // ---- search ----------------------------------------------------------------------------
  let matches = [];
  let current = -1;
  let searchTimer = 0;
  function runSearch() {
    for (const i of matches) sassRows[i].classList.remove("mgl-match");
    const term = search.value.trim().toLowerCase();
    matches = term ? lineText.flatMap((t, i) => (t.includes(term) ? [i] : [])) : [];
    for (const i of matches) sassRows[i].classList.add("mgl-match");
    current = matches.length ? 0 : -1;
    showMatch();
    model.set("search", search.value);
    model.save_changes();
  }
  function showMatch() {
    matchLabel.textContent = search.value.trim() ? `${matches.length ? current + 1 : 0} / ${matches.length}` : "";
    if (current >= 0) scrollWithin(listing, sassRows[matches[current]]);
  }
  function step(d) {
    if (!matches.length) return;
    current = (current + d + matches.length) % matches.length;
    showMatch();
  }
  search.addEventListener("input", () => { clearTimeout(searchTimer); searchTimer = setTimeout(runSearch, 120); });
  search.addEventListener("keydown", (ev) => {
    if (ev.key === "Enter") { clearTimeout(searchTimer); if (search.value.toLowerCase().trim() && !matches.length) runSearch(); else step(ev.shiftKey ? -1 : 1); }
  });
  prevBtn.addEventListener("click", () => step(-1));
  nextBtn.addEventListener("click", () => step(1));

  // ---- mix and resources -----------------------------------------------------------------
  const mixData = model.get("mix");
  const maxCount = Math.max(1, ...mixData.map((m) => m[1]));
  for (const [family, count] of mixData) {
    const bar = h("div", { class: "mgl-mix-bar" });
    bar.style.width = `${(100 * count) / maxCount}%`;
    mix.append(h("span", { text: family }), h("div", {}, [bar]), h("span", { class: "num", text: String(count) }));
  }
  opcodeTable.append(
    ...model.get("opcodes").map(([op, n]) => h("tr", {}, [h("td", { text: op }), h("td", { class: "num", text: String(n) })])),
  );
  for (const [q, v, note] of model.get("resources")) {
    const noteCell = h("td", { class: "mgl-status", text: note });
    if (/spill|over|limit|does not/.test(note) && !/^limited by/.test(note)) noteCell.className = "mgl-warn";
    resources.append(h("tr", {}, [h("td", { text: q }), h("td", { class: "num", text: v }), noteCell]));
  }

  if (files.length) showFile(0);
  if (model.get("search")) { search.value = model.get("search"); runSearch(); }
  applySelection(true);
  const onSelection = () => applySelection(true);
  model.on("change:selected_sass", onSelection);
  model.on("change:selected_source", onSelection);
  const showStatic = hideStaticTwin(model);
  return () => {
    showStatic();
    clearTimeout(searchTimer);
    model.off("change:selected_sass", onSelection);
    model.off("change:selected_source", onSelection);
  };
}

export default { render };
