// SASS view (anywidget ESM): coloured listing, search, source <-> SASS <-> PTX selection,
// instruction mix and resource report. Tokens and cross references arrive precomputed from
// Python; this file only builds DOM and moves highlight classes around. Keys in the listing:
// up/down move the selection, n/N step through search hits, Enter follows a branch.

function render({ model, el }) {
  const root = h("div", { class: "mgl mgl-sass" });
  const search = h("input", { type: "search", class: "mgl-sass-search", placeholder: "search SASS (Enter: next)" });
  search.style.width = "18em";
  const matchLabel = h("span", { class: "mgl-status mgl-sass-matches" });
  const prevBtn = h("button", { class: "mgl-btn", text: "▲", title: "previous match" });
  const nextBtn = h("button", { class: "mgl-btn", text: "▼", title: "next match" });
  const scaffoldBox = h("input", { type: "checkbox", class: "mgl-sass-scaffolding" });
  const regionLabel = h("span", { class: "mgl-status mgl-sass-region" });
  // Register pressure: jumps through the lines where the most registers are live.
  const peakBtn = h("button", { class: "mgl-btn mgl-sass-peak-btn" });
  const toolbar = h("div", { class: "mgl-toolbar" }, [
    h("span", { class: "mgl-title", text: `SASS: ${model.get("title")}` }), search, prevBtn, nextBtn, matchLabel,
    h("label", { title: "nvdisasm's //## File markers, directives and section headers" }, [scaffoldBox, " markers & directives"]),
    regionLabel, peakBtn,
  ]);
  // Jump between the instructions of each class that matters (HGMMA, UTMA*, LDS/STS, ...).
  const classBar = h("div", { class: "mgl-toolbar mgl-sass-classes" });
  const notes = h("div", { class: "mgl-status" });
  const listing = h("div", { class: "mgl-code mgl-sass-listing", tabindex: "0" });
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
  root.append(toolbar, classBar, notes, main, bottom);
  el.append(root);

  const lines = model.get("lines");
  const labels = model.get("file_labels");
  const scaffolding = model.get("scaffolding");
  const lineClass = model.get("line_class");
  const keyClasses = model.get("key_classes");
  const classCounts = model.get("source_class_counts");
  const isInstruction = model.get("instruction");
  const sassSource = model.get("sass_source");
  const files = model.get("files");
  const fileTexts = model.get("file_texts");
  const keys = model.get("source_keys");
  const keySass = model.get("source_sass");
  const keyPtx = model.get("source_ptx");
  const keyIndex = new Map(keys.map((k, i) => [`${k[0]}:${k[1]}`, i]));
  const ptxSource = model.get("ptx_source") || [];
  const branchTarget = model.get("branch_target") || [];
  const live = model.get("live_registers") || [];
  const livePeak = model.get("live_peak") || [];
  const peakSet = new Set(livePeak);
  const liveWidth = String(Math.max(0, ...live)).length;
  const height = model.get("height");
  listing.style.height = `${height}px`;
  source.style.height = `${Math.round(height * 0.55)}px`;
  ptx.style.height = `${Math.round(height * 0.3)}px`;
  notes.textContent = model.get("notes").join(" · ");

  // ---- listing ---------------------------------------------------------------------------
  const digits = String(lines.length).length;
  const lineText = [];
  let previousSource = "";
  const sassRows = lines.map((tokens, i) => {
    const row = h("div", { class: "mgl-code-line", "data-line": String(i) });
    row.append(h("span", { class: "mgl-lineno", text: String(i + 1).padStart(digits) }));
    if (live.length) {
      // Live GPRs at this instruction (nvdisasm's life ranges); the peak in red.
      const n = live[i];
      const cell = h("span", { class: "mgl-sass-live", text: (n >= 0 ? String(n) : "").padStart(liveWidth) + " " });
      cell.style.color = peakSet.has(i) ? "#c0392b" : "#8a8a8a";
      if (peakSet.has(i)) { cell.style.fontWeight = "700"; cell.title = `register-pressure peak: ${n} live registers`; }
      else if (n >= 0) cell.title = `${n} live registers`;
      row.append(cell);
    }
    let text = "";
    tokens.forEach(([cls, t], k) => {
      // nvdisasm indents instructions by 8 and pads before the opcode column; drop the same
      // amount from every instruction so opcodes stay aligned and the source column fits.
      if (!cls && isInstruction[i] && k <= 2 && !t.trim()) t = k === 0 ? "" : t.slice(Math.min(12, t.length - 1));
      if (cls === "label" && branchTarget[i] >= 0) {
        // A branch target: a link to its label line.
        const link = h("a", { class: "sass-label mgl-sass-branch", href: "#", title: `go to line ${branchTarget[i] + 1} (Enter)`, text: t });
        link.addEventListener("click", (ev) => { ev.preventDefault(); ev.stopPropagation(); jumpTo(branchTarget[i]); });
        row.append(link);
      } else row.append(cls ? h("span", { class: `sass-${cls}`, text: t }) : document.createTextNode(t));
      text += t;
    });
    lineText.push(text.toLowerCase());
    if (scaffolding[i]) row.classList.add("mgl-scaffold");
    const k = keyClasses.indexOf(lineClass[i]);
    if (k >= 0) { row.classList.add("mgl-key", `mgl-key-${k}`); row.dataset.keyClass = lineClass[i]; }
    const src = sassSource[i];
    if (!src) row.classList.add("mgl-nocode");
    else {
      // The DSL line beside the first instruction of each run from it (as Nsight's source view).
      const key = `${src[0]}:${src[1]}`;
      if (key !== previousSource) {
        const code = ((fileTexts[src[0]] || [])[src[1]] || "").trim();
        row.append(h("span", { class: "mgl-sass-src", text: `${labels[src[0]]}, line ${src[1] + 1}  ${code}` }));
        previousSource = key;
      }
    }
    row.addEventListener("click", () => { selectSass(i); listing.focus({ preventScroll: true }); });
    return row;
  });
  listing.append(...sassRows);
  const applyScaffolding = () => root.classList.toggle("mgl-show-scaffolding", model.get("show_scaffolding"));
  scaffoldBox.checked = model.get("show_scaffolding");
  scaffoldBox.addEventListener("change", () => { model.set("show_scaffolding", scaffoldBox.checked); model.save_changes(); });
  applyScaffolding();

  const classLines = keyClasses.map((name) => lineClass.flatMap((c, i) => (c === name ? [i] : [])));
  const classPos = keyClasses.map(() => -1);
  keyClasses.forEach((name, k) => {
    const n = classLines[k].length;
    const chip = h("button", {
      class: `mgl-btn mgl-key-chip mgl-key-${k}`, "data-key-class": name,
      title: n ? `next ${name} instruction (shift-click: previous)` : `no ${name} instruction`,
    }, [h("span", { class: "mgl-key-dot" }), `${name} ${n}`]);
    chip.disabled = !n;
    chip.addEventListener("click", (ev) => {
      const step = ev.shiftKey ? -1 : 1;
      classPos[k] = (classPos[k] + step + n) % n;
      const line = classLines[k][classPos[k]];
      selectSass(line);
      scrollWithin(listing, sassRows[line]);
      chip.textContent = "";
      chip.append(h("span", { class: "mgl-key-dot" }), `${name} ${classPos[k] + 1}/${n}`);
    });
    classBar.append(chip);
  });

  // ---- source ----------------------------------------------------------------------------
  let shownFile = -1;
  let sourceRows = [];
  files.forEach((f, i) => fileSelect.append(h("option", { value: String(i), text: labels[i] })));
  fileSelect.style.display = files.length > 1 ? "" : "none";
  fileSelect.addEventListener("change", () => showFile(Number(fileSelect.value)));

  function showFile(fileId) {
    if (fileId === shownFile) return;
    shownFile = fileId;
    fileSelect.value = String(fileId);
    const text = fileTexts[fileId] || [];
    const width = String(text.length).length;
    sourceRows = text.map((t, line) => {
      const k = keyIndex.get(`${fileId}:${line}`);
      const hasCode = k !== undefined;
      const row = h("div", { class: hasCode ? "mgl-code-line" : "mgl-code-line mgl-nocode", "data-line": String(line) }, [
        h("span", { class: "mgl-lineno", text: String(line + 1).padStart(width) }),
        t,
      ]);
      // Per source line: how many instructions of each class it became.
      if (hasCode) {
        (classCounts[k] || []).forEach((n, c) => {
          if (n) row.append(h("span", { class: `mgl-badge mgl-key-${c}`, text: `${keyClasses[c]} ${n}` }));
        });
      }
      if (hasCode) row.addEventListener("click", () => selectSource(fileId, line));
      return row;
    });
    source.replaceChildren(...sourceRows);
    if (!text.length) source.append(h("div", { class: "mgl-status", text: "(source text not available)" }));
  }

  // ---- PTX -------------------------------------------------------------------------------
  const ptxText = model.get("ptx_lines");
  const ptxDigits = String(ptxText.length).length;
  const ptxRows = ptxText.map((t, i) => {
    const hasSource = (ptxSource[i] ?? -1) >= 0;
    const row = h("div", { class: hasSource ? "mgl-code-line" : "mgl-code-line mgl-nocode", "data-line": String(i) }, [
      h("span", { class: "mgl-lineno", text: String(i + 1).padStart(ptxDigits) }),
      t,
    ]);
    if (hasSource) row.addEventListener("click", () => selectPtx(i));
    return row;
  });
  ptx.append(...ptxRows);

  // ---- selection -------------------------------------------------------------------------
  let marked = [];
  function mark(row, cls) {
    if (!row) return;
    row.classList.add(cls);
    marked.push([row, cls]);
  }

  function selectSass(i) {
    model.set("selected_ptx", -1);
    model.set("selected_sass", i);
    model.set("selected_source", sassSource[i] ? sassSource[i] : []);
    model.save_changes(); // the change events re-apply the highlights
  }

  function selectSource(fileId, line) {
    model.set("selected_ptx", -1);
    model.set("selected_sass", -1);
    model.set("selected_source", [fileId, line]);
    model.save_changes();
  }

  // A PTX line selects the source line it came from, and so that line's SASS.
  function selectPtx(p) {
    const k = ptxSource[p];
    model.set("selected_sass", -1);
    model.set("selected_ptx", p);
    model.set("selected_source", k >= 0 ? keys[k] : []);
    model.save_changes();
  }

  function jumpTo(line) {
    if (line < 0 || line >= sassRows.length) return;
    selectSass(line);
    scrollWithin(listing, sassRows[line]);
  }

  // ---- keyboard (the listing has focus after a click) -------------------------------------
  const visible = (i) => model.get("show_scaffolding") || !scaffolding[i];
  function moveSelection(d) {
    let i = model.get("selected_sass");
    if (i < 0) i = d > 0 ? -1 : sassRows.length;
    for (i += d; i >= 0 && i < sassRows.length; i += d) if (visible(i)) return jumpTo(i);
  }
  listing.addEventListener("keydown", (ev) => {
    if (ev.ctrlKey || ev.metaKey || ev.altKey) return;
    const sel = model.get("selected_sass");
    if (ev.key === "ArrowDown" || ev.key === "ArrowUp") moveSelection(ev.key === "ArrowDown" ? 1 : -1);
    else if (ev.key === "n" || ev.key === "N") { step(ev.key === "n" ? 1 : -1); if (current >= 0) jumpTo(matches[current]); }
    else if (ev.key === "Enter" && sel >= 0 && branchTarget[sel] >= 0) jumpTo(branchTarget[sel]);
    else return;
    ev.preventDefault();
  });

  function applySelection(scroll) {
    for (const [row, cls] of marked) row.classList.remove(cls);
    marked = [];
    const sel = model.get("selected_sass");
    const src = model.get("selected_source");
    const selPtx = model.get("selected_ptx");
    if (sel >= 0) mark(sassRows[sel], "mgl-selected");
    if (selPtx >= 0) mark(ptxRows[selPtx], "mgl-selected");
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
    sourceTitle.textContent = `Source: ${labels[fileId]}, line ${line + 1}  ${text.trim()}`;
    const k = keyIndex.get(`${fileId}:${line}`);
    const related = k === undefined ? [] : keySass[k];
    const ptxLines = k === undefined ? [] : keyPtx[k];
    for (const s of related) if (s !== sel) mark(sassRows[s], "mgl-related");
    for (const p of ptxLines) if (p !== selPtx) mark(ptxRows[p], "mgl-related");
    ptxTitle.textContent = ptxLines.length
      ? `PTX: ${ptxLines.length} line${ptxLines.length > 1 ? "s" : ""} from this source line`
      : "PTX: none from this source line";
    if (scroll) {
      scrollWithin(source, srcRow);
      if (selPtx < 0 && ptxLines.length) scrollWithin(ptx, ptxRows[ptxLines[0]]);
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

  // ---- register pressure -------------------------------------------------------------------
  let peakPos = -1;
  peakBtn.style.display = livePeak.length ? "" : "none";
  const peakText = () => `peak ${live[livePeak[0]]} live registers` + (livePeak.length > 1 ? ` (${peakPos + 1}/${livePeak.length})` : "");
  peakBtn.title = "register-pressure peak: jump to the next line where the most registers are live";
  if (livePeak.length) peakBtn.textContent = peakText();
  peakBtn.addEventListener("click", () => {
    peakPos = (peakPos + 1) % livePeak.length;
    peakBtn.textContent = peakText();
    jumpTo(livePeak[peakPos]);
  });

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

  // ---- named regions (a slice clicked on a timeline of this kernel) -----------------------
  let regionRows = [];
  function applyRegion() {
    for (const row of regionRows) row.classList.remove("mgl-region");
    const name = model.get("selected_region");
    const lines = (model.get("region_sass") || {})[name] || [];
    regionRows = lines.map((i) => sassRows[i]).filter(Boolean);
    for (const row of regionRows) row.classList.add("mgl-region");
    regionLabel.textContent = name ? `region ${name}: ${lines.length} instructions` : "";
    if (regionRows.length) scrollWithin(listing, regionRows[0]);
  }
  const onRegionEvent = (ev) => {
    const d = ev.detail || {};
    if (d.kernel !== model.get("title")) return;
    model.set("selected_region", d.region || "");
    model.save_changes();
  };
  window.addEventListener(MGL_REGION_EVENT, onRegionEvent);

  if (files.length) showFile(0);
  if (model.get("search")) { search.value = model.get("search"); runSearch(); }
  applySelection(true);
  applyRegion();
  model.on("change:selected_region", applyRegion);
  model.on("change:show_scaffolding", applyScaffolding);
  const onSelection = () => applySelection(true);
  model.on("change:selected_sass", onSelection);
  model.on("change:selected_source", onSelection);
  model.on("change:selected_ptx", onSelection);
  const showStatic = hideStaticTwin(model);
  return () => {
    showStatic();
    clearTimeout(searchTimer);
    model.off("change:selected_sass", onSelection);
    model.off("change:selected_source", onSelection);
    model.off("change:selected_ptx", onSelection);
    model.off("change:selected_region", applyRegion);
    model.off("change:show_scaffolding", applyScaffolding);
    window.removeEventListener(MGL_REGION_EVENT, onRegionEvent);
  };
}

export default { render };
