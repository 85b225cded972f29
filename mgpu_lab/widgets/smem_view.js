// Shared-memory view (anywidget ESM): address map, and the bank grid of the chosen buffer
// with the bank conflicts of the chosen warp access. Python computes the grid (bank_model);
// this file draws it and sends the user's choices back.

function bytes(n) {
  return n < 1024 ? `${n} B` : `${(n / 1024).toFixed(n % 1024 ? 2 : 0)} KiB`;
}

const LANE_H = 22;
const PATTERN_TEXT = { row: "row", column: "column", fragment: "WGMMA fragment", ldmatrix: "ldmatrix.x4 (LDSM)" };
const INDEX_TEXT = { row: "row", column: "column", fragment: "8x8 tile", ldmatrix: "16x16 tile", unknown: "index" };

function render({ model, el }) {
  const buffers = model.get("buffers");
  const total = Math.max(model.get("total_bytes"), 1);
  const root = h("div", { class: "mgl mgl-smem" });
  const toolbar = h("div", { class: "mgl-toolbar" }, [
    h("span", { class: "mgl-title", text: `Shared memory: ${model.get("title")}` }),
    h("span", { class: "mgl-status", text: `${bytes(model.get("total_bytes"))} dynamic, ${buffers.length} buffers` }),
  ]);

  // ---- address map -----------------------------------------------------------------------
  const lanes = Math.max(1, ...buffers.map((b) => b.lane + 1));
  const map = h("div", { class: "mgl-smem-map" });
  map.style.height = `${lanes * LANE_H + 2}px`;
  const bufferDivs = buffers.map((b, i) => {
    const div = h("div", { class: "mgl-smem-buf", "data-buffer": b.path, text: b.path });
    // At least 6 px wide, and kept inside the map when that pushes past its right edge.
    div.style.left = `min(${(100 * b.offset) / total}%, calc(100% - 6px))`;
    div.style.width = `max(6px, ${(100 * b.nbytes) / total}%)`;
    div.style.top = `${b.lane * LANE_H + 1}px`;
    div.style.height = `${LANE_H - 3}px`;
    div.style.background = b.color;
    const union = b.union >= 0 ? `, union ${b.union}` : "";
    div.title = `${b.path} (${b.kind}${union})\noffset ${b.offset}, ${b.nbytes} B, [${b.shape}] ${b.dtype}\nswizzle ${b.swizzle || "none"}, aligned to ${b.alignment} B` +
      (b.warnings.length ? `\n⚠ ${b.warnings.join("\n⚠ ")}` : "");
    div.addEventListener("click", () => choose({ buffer: i }));
    map.append(div);
    return div;
  });
  const axis = h("div", { class: "mgl-smem-axis" });
  for (let k = 0; k <= 4; k++) {
    const tick = h("span", { text: bytes(Math.round((total * k) / 4)) });
    tick.style.left = `${25 * k}%`;
    if (k === 0) tick.style.transform = "none";
    if (k === 4) tick.style.transform = "translateX(-100%)";
    axis.append(tick);
  }
  const details = h("div", { class: "mgl-status mgl-smem-details" });

  // The same buffers as a table: tiny ones (barriers) are hard to hit on the map.
  const bufferTable = h("table", { class: "mgl-table mgl-smem-table" });
  bufferTable.append(h("thead", {}, [h("tr", {}, ["buffer", "kind", "offset", "bytes", "shape", "swizzle", "union", ""].map(
    (t, i) => h("th", { class: i >= 2 && i <= 3 ? "num" : "", text: t })))]));
  const tableRows = buffers.map((b, i) => {
    const swatch = h("span", { class: "mgl-swatch" });
    swatch.style.background = b.color;
    const tr = h("tr", { class: "mgl-code-line", "data-buffer": b.path }, [
      h("td", {}, [swatch, b.path]),
      h("td", { text: b.kind }),
      h("td", { class: "num", text: String(b.offset) }),
      h("td", { class: "num", text: String(b.nbytes) }),
      h("td", { text: `[${b.shape}] ${b.dtype}` }),
      h("td", { text: b.swizzle ? `${b.swizzle} B` : "none" }),
      h("td", { text: b.union >= 0 ? String(b.union) : "" }),
      h("td", { class: "mgl-warn", text: b.warnings.join("; ") }),
    ]);
    tr.addEventListener("click", () => choose({ buffer: i }));
    return tr;
  });
  bufferTable.append(h("tbody", {}, tableRows));
  const unnamed = h("div", { class: "mgl-status mgl-smem-unnamed", text: model.get("unnamed_note") });
  const tableBox = h("details", { class: "mgl-smem-buffers" }, [h("summary", { text: "buffers" }), bufferTable, unnamed]);
  tableBox.open = buffers.length <= 12;

  // ---- controls --------------------------------------------------------------------------
  const bufferSelect = h("select", { class: "mgl-smem-buffer" });
  buffers.forEach((b, i) => bufferSelect.append(h("option", { value: String(i), text: b.path })));
  const patternSelect = h("select", { class: "mgl-smem-pattern" });
  for (const p of model.get("patterns")) patternSelect.append(h("option", { value: p, text: PATTERN_TEXT[p] || p }));
  const indexLabel = h("span", { text: "row" });
  const indexInput = h("input", { type: "number", class: "mgl-smem-index", min: "0", step: "1" });
  indexInput.style.width = "5em";
  const vectorSelect = h("select", { class: "mgl-smem-vector" });
  // The kernel's own LDS/STS/LDSM/STSM (wavefronts from their derived lane addresses, or unknown),
  // TMA and WGMMA (what their operands say); Python derives and explains each.
  const instrSelect = h("select", { class: "mgl-smem-instruction" });
  instrSelect.append(h("option", { value: "-1", text: "(none: the hypothetical access)" }));
  model.get("instructions").forEach((ins, k) =>
    instrSelect.append(h("option", {
      value: String(k),
      text: `${ins.text}  (line ${ins.line + 1}) — ` + (ins.pattern === "kernel"
        ? `${Number.isInteger(ins.wavefronts) ? ins.wavefronts : ins.wavefronts.toFixed(2)} wavefront${ins.wavefronts === 1 ? "" : "s"}`
        : "unknown"),
      title: ins.why || ins.detail || "",
    })));
  instrSelect.style.maxWidth = "28em";
  const controls = h("div", { class: "mgl-toolbar" }, [
    h("span", { text: "buffer" }), bufferSelect,
    h("span", { text: "hypothetical access", title: "a what-if pattern, not derived from the kernel's addresses" }), patternSelect,
    indexLabel, indexInput,
    h("span", { text: "bytes / thread" }), vectorSelect,
    h("span", { text: "or the kernel's instruction" }), instrSelect,
  ]);
  instrSelect.addEventListener("change", () => choose({ instruction: Number(instrSelect.value) }));
  bufferSelect.addEventListener("change", () => choose({ buffer: Number(bufferSelect.value) }));
  patternSelect.addEventListener("change", () => choose({ pattern: patternSelect.value, index: 0, instruction: -1 }));
  indexInput.addEventListener("change", () => choose({ index: Math.max(0, Math.floor(Number(indexInput.value) || 0)) }));
  vectorSelect.addEventListener("change", () => choose({ vector_bytes: Number(vectorSelect.value), instruction: -1 }));

  const report = h("div", { class: "mgl-smem-report" });
  const legend = h("div", { class: "mgl-legend" });
  const gridBox = h("div", { class: "mgl-smem-grid" });
  gridBox.style.overflowX = "auto";
  root.append(toolbar, map, axis, tableBox, details, controls, report, legend, gridBox);
  el.append(root);

  function choose(values) {
    for (const [k, v] of Object.entries(values)) model.set(k, v);
    model.save_changes();
  }

  function buildLegend() {
    const chunkColors = model.get("chunk_colors");
    const conflictColors = model.get("conflict_colors");
    const item = (color, text) => {
      const sw = h("span", { class: "mgl-swatch" });
      sw.style.background = color;
      return h("span", {}, [sw, text]);
    };
    legend.replaceChildren(
      h("span", { text: "cell: logical row,col; colour: its 16-byte chunk in the row" }),
      ...chunkColors.map((c, i) => item(c, String(i))),
      h("span", { text: "· accessed:" }),
      item(conflictColors[0], "conflict-free"),
      item(conflictColors[1], "2-way"),
      item(conflictColors[3], "3-4-way"),
      item(conflictColors[7], "5-8-way"),
      item(conflictColors[8], "worse"),
    );
  }

  function renderGrid() {
    const g = model.get("grid");
    const sel = model.get("buffer");
    bufferDivs.forEach((d, i) => d.classList.toggle("mgl-selected", i === sel));
    tableRows.forEach((r, i) => r.classList.toggle("mgl-selected", i === sel));
    bufferSelect.value = String(sel);
    instrSelect.value = String(model.get("instruction"));
    if (!g || !g.labels) {
      report.textContent = (g && g.summary) || model.get("conflict_summary");
      report.dataset.maxWay = "";
      gridBox.replaceChildren();
      return;
    }
    const b = buffers[sel];
    details.textContent = `${b.path}: offset ${b.offset}, ${b.nbytes} B, [${b.shape}] ${b.dtype} viewed as ${g.rows} x ${g.cols}, ` +
      `swizzle ${g.swizzle ? `${g.swizzle} B` : "none"}, aligned to ${b.alignment} B` + (b.warnings.length ? ` — ⚠ ${b.warnings.join("; ")}` : "");
    const unknown = g.pattern === "unknown" || g.pattern === "kernel"; // the kernel's own access: no hypothetical choice
    patternSelect.value = g.pattern;
    if (unknown) patternSelect.selectedIndex = -1; // an instruction's access is no hypothetical pattern
    indexInput.disabled = unknown;
    indexLabel.textContent = INDEX_TEXT[g.pattern] || "index";
    indexInput.max = String(g.index_limit);
    indexInput.value = String(g.index);
    vectorSelect.replaceChildren(...g.vector_choices.map((w) => h("option", { value: String(w), text: String(w) })));
    // Fragment and ldmatrix fix the width; show it (once) and lock the choice.
    if (!g.vector_choices.includes(g.vector_bytes)) {
      vectorSelect.append(h("option", { value: String(g.vector_bytes), text: String(g.vector_bytes) }));
    }
    vectorSelect.disabled = unknown || g.pattern === "fragment" || g.pattern === "ldmatrix";
    vectorSelect.value = String(g.vector_bytes);
    report.textContent = g.summary;
    report.dataset.maxWay = String(g.max_way);
    report.dataset.wavefronts = String(g.wavefronts);

    const chunkColors = model.get("chunk_colors");
    const conflictColors = model.get("conflict_colors");
    const hits = new Map(g.hits.map(([line, bank, ways, threads]) => [`${line}:${bank}`, [ways, threads]]));
    const table = h("table", { class: "mgl-banks" });
    const head = h("tr", {}, [h("th", { text: "line" })]);
    for (let bank = 0; bank < 32; bank++) head.append(h("th", { text: String(bank) }));
    table.append(h("thead", {}, [head]));
    const body = h("tbody");
    g.labels.forEach((labels, line) => {
      const tr = h("tr", {}, [h("th", { text: String(g.first_line + line) })]);
      labels.forEach((label, bank) => {
        const td = h("td", { text: label });
        const chunk = g.chunks[line][bank];
        const hit = hits.get(`${line}:${bank}`);
        if (hit) {
          const [ways, threads] = hit;
          td.className = "mgl-hit";
          td.dataset.ways = String(ways);
          td.style.background = conflictColors[Math.min(ways, 32) - 1];
          td.textContent = `t${threads[0]}${threads.length > 1 ? "+" : ""}`;
          td.title = `element ${label} · bank ${bank} · threads ${threads.join(", ")} · ${ways} distinct word${ways > 1 ? "s" : ""} in this bank`;
        } else if (chunk < 0) {
          td.className = "mgl-outside";
        } else {
          td.style.background = chunkColors[chunk % chunkColors.length];
          td.style.color = "#333";
          td.title = `element ${label} · bank ${bank} · chunk ${chunk}`;
        }
        tr.append(td);
      });
      body.append(tr);
    });
    table.append(body);
    gridBox.replaceChildren(table);
  }

  buildLegend();
  renderGrid();
  model.on("change:grid", renderGrid);
  model.on("change:buffer", renderGrid);
  const showStatic = hideStaticTwin(model);
  return () => {
    showStatic();
    model.off("change:grid", renderGrid);
    model.off("change:buffer", renderGrid);
  };
}

export default { render };
