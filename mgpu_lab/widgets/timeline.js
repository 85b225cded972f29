// Timeline view (anywidget ESM). Draws the trace on a canvas; only the rows in view and, in
// each lane (row, nesting level), only the events in the visible time range are visited:
// events of a lane do not overlap and are sorted by start, so a binary search finds the first.
// Sub-pixel events of one region that touch are merged into one rectangle, so a zoomed-out
// million-event trace costs one pass over the events and far fewer canvas calls.

const LABEL_W = 130; // px, row labels
const AXIS_H = 24; // px, time axis
const LEVEL_H = 13; // px per nesting level
const ROW_GAP = 3; // px between rows
const PERFETTO_ORIGIN = "https://ui.perfetto.dev";

// A typed array over a synced binary buffer (DataView in JupyterLab/Notebook, possibly an
// ArrayBuffer or another view elsewhere). Copies only when the offset is misaligned.
function typed(value, Type) {
  if (!value) return new Type(0);
  if (value instanceof ArrayBuffer) return new Type(value);
  if (ArrayBuffer.isView(value)) {
    if (value.byteOffset % Type.BYTES_PER_ELEMENT === 0) {
      return new Type(value.buffer, value.byteOffset, value.byteLength / Type.BYTES_PER_ELEMENT);
    }
    return new Type(value.buffer.slice(value.byteOffset, value.byteOffset + value.byteLength));
  }
  return new Type(0);
}

// First index in [lo, hi) with arr[i] >= x (arr sorted ascending there).
function lowerBound(arr, x, lo, hi) {
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (arr[mid] < x) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

// Tick step (1, 2 or 5 times a power of ten) giving about `target` ticks over `span`.
function tickStep(span, target) {
  const raw = span / Math.max(target, 1);
  const p = Math.pow(10, Math.floor(Math.log10(raw)));
  for (const m of [1, 2, 5, 10]) if (m * p >= raw) return m * p;
  return 10 * p;
}

function loadData(model) {
  const d = {
    rowLevels: typed(model.get("_row_levels"), Uint32Array),
    laneRow: typed(model.get("_lane_row"), Uint32Array),
    laneLevel: typed(model.get("_lane_level"), Uint32Array),
    laneOffsets: typed(model.get("_lane_offsets"), Uint32Array),
    laneMaxDur: typed(model.get("_lane_max_duration"), Float64Array),
    start: typed(model.get("_start"), Float64Array),
    end: typed(model.get("_end"), Float64Array),
    region: typed(model.get("_region"), Uint32Array),
    block: typed(model.get("_block"), Uint32Array),
    flags: typed(model.get("_flags"), Uint8Array),
    blockRow: typed(model.get("_block_row"), Uint32Array),
    blockStart: typed(model.get("_block_start"), Float64Array),
    blockEnd: typed(model.get("_block_end"), Float64Array),
    blockId: typed(model.get("_block_id"), Uint32Array),
    labels: model.get("row_labels"),
    names: model.get("region_names"),
    colors: model.get("region_colors"),
    units: model.get("units_per_block"),
  };
  // Row tops in content pixels, and each row's first lane (lanes are sorted by row).
  const rows = d.rowLevels.length;
  d.rowTop = new Float64Array(rows + 1);
  for (let r = 0; r < rows; r++) d.rowTop[r + 1] = d.rowTop[r] + d.rowLevels[r] * LEVEL_H + ROW_GAP;
  d.rowFirstLane = new Int32Array(rows + 1);
  let lane = 0;
  for (let r = 0; r <= rows; r++) {
    while (lane < d.laneRow.length && d.laneRow[lane] < r) lane++;
    d.rowFirstLane[r] = lane;
  }
  return d;
}

function render({ model, el }) {
  let data = loadData(model);
  let [t0, t1] = model.get("view_range");
  if (!(t1 > t0)) [t0, t1] = [0, Math.max(model.get("duration_ns"), 1)];
  let hidden = new Set();
  const syncHidden = () => {
    const names = model.get("hidden_regions");
    hidden = new Set(data.names.map((n, i) => (names.includes(n) ? i : -1)).filter((i) => i >= 0));
  };
  syncHidden();

  // ---- DOM -------------------------------------------------------------------------------
  const root = h("div", { class: "mgl mgl-tl" });
  const title = h("span", { class: "mgl-title", text: model.get("title") });
  const rangeLabel = h("span", { class: "mgl-tl-range" });
  const resetBtn = h("button", { class: "mgl-btn", text: "Reset zoom", title: "Show the whole kernel (or double-click the plot)" });
  const saveBtn = h("button", { class: "mgl-btn mgl-tl-save", text: "Save .perfetto-trace" });
  const openBtn = h("button", { class: "mgl-btn mgl-tl-open", text: "Open in Perfetto UI" });
  const status = h("span", { class: "mgl-status" });
  const toolbar = h("div", { class: "mgl-toolbar" }, [title, rangeLabel, resetBtn, saveBtn, openBtn, status]);
  const filters = h("div", { class: "mgl-tl-filters" });
  const canvas = h("canvas", { class: "mgl-tl-canvas" });
  const spacer = h("div", { class: "mgl-tl-spacer" });
  const scroller = h("div", { class: "mgl-tl-scroll" }, [canvas, spacer]);
  const tooltip = h("div", { class: "mgl-tooltip" });
  tooltip.style.display = "none";
  const plot = h("div", { class: "mgl-tl-plot" }, [scroller, tooltip]);
  const notes = h("div", { class: "mgl-notes" });
  const summary = h("div", { class: "mgl-tl-summary" });
  root.append(toolbar, filters, plot, notes, summary);
  el.append(root);

  function buildFilters() {
    filters.replaceChildren();
    data.names.forEach((name, i) => {
      const box = h("input", { type: "checkbox", "data-region": name });
      box.checked = !hidden.has(i);
      box.addEventListener("change", () => {
        const now = new Set(model.get("hidden_regions"));
        if (box.checked) now.delete(name);
        else now.add(name);
        model.set("hidden_regions", data.names.filter((n) => now.has(n)));
        model.save_changes();
      });
      const swatch = h("span", { class: "mgl-swatch" });
      swatch.style.background = data.colors[i];
      filters.append(h("label", { class: "mgl-tl-filter" }, [box, swatch, name]));
    });
  }

  function buildSummary() {
    const headers = model.get("summary_headers");
    const rows = model.get("summary_rows");
    const shares = model.get("summary_shares");
    const table = h("table", { class: "mgl-table" });
    table.append(h("thead", {}, [h("tr", {}, headers.map((t, i) => h("th", { class: i ? "num" : "", text: t })))]));
    const body = h("tbody");
    rows.forEach((cells, r) => {
      const tr = h("tr");
      cells.forEach((c, i) => {
        const td = h("td", { class: i ? "num" : "" });
        if (i === 0) {
          const swatch = h("span", { class: "mgl-swatch" });
          swatch.style.background = data.colors[data.names.indexOf(c)] || "#888";
          td.append(swatch, c);
        } else if (i === cells.length - 1) {
          const bar = h("span", { class: "mgl-share-bar" });
          bar.style.width = `${Math.min(100, 100 * shares[r])}%`;
          td.append(h("span", { class: "mgl-share" }, [bar]), c);
        } else td.textContent = c;
        tr.append(td);
      });
      body.append(tr);
    });
    table.append(body);
    summary.replaceChildren(table);
    notes.replaceChildren(...model.get("notes").map((n) => h("div", { text: n })));
  }

  // ---- geometry --------------------------------------------------------------------------
  // Canvas size in CSS pixels, set by layoutSize; 0 until the view is attached and visible.
  let cssW = 0, cssH = 0;
  const plotWidth = () => Math.max(cssW - LABEL_W, 10);
  const xOf = (t) => LABEL_W + ((t - t0) / (t1 - t0)) * plotWidth();
  const tOf = (x) => t0 + ((x - LABEL_W) / plotWidth()) * (t1 - t0);

  function layoutSize() {
    const contentH = AXIS_H + data.rowTop[data.rowTop.length - 1];
    const viewH = Math.min(contentH + 2, model.get("height"));
    scroller.style.height = `${viewH}px`;
    // The canvas is sticky at the top of the scroller; the spacer makes the rest scrollable.
    spacer.style.height = `${Math.max(contentH - viewH, 0)}px`;
    // Not attached yet, or hidden (collapsed output, background tab): the ResizeObserver
    // calls again once the view has a width.
    const w = scroller.clientWidth;
    if (!w) return;
    const dpr = window.devicePixelRatio || 1;
    [cssW, cssH] = [w, viewH];
    canvas.style.width = `${w}px`;
    canvas.style.height = `${viewH}px`;
    canvas.width = Math.round(w * dpr);
    canvas.height = Math.round(viewH * dpr);
  }

  // ---- drawing ---------------------------------------------------------------------------
  let frame = 0;
  function requestDraw() {
    if (!frame) frame = requestAnimationFrame(() => { frame = 0; draw(); });
  }

  function draw() {
    if (!cssW) return;
    const started = performance.now();
    const ctx = canvas.getContext("2d");
    const dpr = window.devicePixelRatio || 1;
    const W = cssW, H = cssH;
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    const style = getComputedStyle(root);
    const fg = style.getPropertyValue("--mgl-fg").trim() || "#222";
    const muted = style.getPropertyValue("--mgl-muted").trim() || "#888";
    const band = style.getPropertyValue("--mgl-band").trim() || "rgba(0,0,0,0.04)";
    ctx.clearRect(0, 0, W, H);
    ctx.font = "11px sans-serif";
    const scrollTop = scroller.scrollTop;
    const nRows = data.rowLevels.length;
    // Visible rows: those whose box intersects [scrollTop, scrollTop + H - AXIS_H).
    const firstRow = Math.max(lowerBound(data.rowTop, scrollTop, 0, nRows + 1) - 1, 0);
    let lastRow = firstRow;
    while (lastRow < nRows && data.rowTop[lastRow] < scrollTop + H - AXIS_H) lastRow++;
    const yOf = (row) => AXIS_H + data.rowTop[row] - scrollTop;

    ctx.save();
    ctx.beginPath();
    ctx.rect(0, AXIS_H, W, H - AXIS_H);
    ctx.clip();
    // Alternate SM bands (rows of one block slot share a band) and row labels.
    for (let r = firstRow; r < lastRow; r++) {
      const y = yOf(r), rh = data.rowLevels[r] * LEVEL_H;
      if (Math.floor(r / data.units) % 2 === 0) {
        ctx.fillStyle = band;
        ctx.fillRect(0, y - 1, W, rh + ROW_GAP);
      }
      ctx.fillStyle = fg;
      ctx.fillText(data.labels[r], 4, y + Math.min(rh, LEVEL_H) - 3, LABEL_W - 8);
    }
    ctx.beginPath();
    ctx.rect(LABEL_W, AXIS_H, W - LABEL_W, H - AXIS_H);
    ctx.clip();
    // Block lifetimes: a thin outline behind the rows of each block's units.
    ctx.strokeStyle = muted;
    ctx.lineWidth = 1;
    for (let b = 0; b < data.blockRow.length; b++) {
      const r0 = data.blockRow[b], r1 = r0 + data.units;
      if (r1 <= firstRow || r0 >= lastRow || data.blockEnd[b] < t0 || data.blockStart[b] > t1) continue;
      const x0 = xOf(data.blockStart[b]), x1 = xOf(data.blockEnd[b]);
      if (x1 - x0 < 3) continue;
      const y0 = yOf(r0) - 1, y1 = yOf(r1) - ROW_GAP + 1;
      ctx.strokeRect(x0 + 0.5, y0 + 0.5, x1 - x0 - 1, y1 - y0 - 1);
    }
    // Events, lane by lane.
    for (let lane = data.rowFirstLane[firstRow]; lane < data.rowFirstLane[lastRow]; lane++) {
      const y = yOf(data.laneRow[lane]) + data.laneLevel[lane] * LEVEL_H;
      const lo = data.laneOffsets[lane], hi = data.laneOffsets[lane + 1];
      let i = lowerBound(data.start, t0 - data.laneMaxDur[lane], lo, hi);
      let runX0 = 0, runX1 = -1, runRegion = -1;
      const flush = () => {
        if (runRegion >= 0) {
          ctx.fillStyle = data.colors[runRegion] || "#888";
          ctx.fillRect(runX0, y, Math.max(runX1 - runX0, 1), LEVEL_H - 1);
        }
        runRegion = -1;
      };
      for (; i < hi && data.start[i] <= t1; i++) {
        if (data.end[i] < t0) continue;
        const reg = data.region[i];
        if (hidden.has(reg)) continue;
        const x0 = xOf(data.start[i]), x1 = xOf(data.end[i]);
        if (x1 - x0 < 2) {
          // Narrow: a pixel the pending run already paints is skipped, a touching event of the
          // same region extends the run. So a lane costs at most one rectangle per pixel column
          // however many events fall into it.
          if (runRegion >= 0 && x0 < Math.floor(runX1)) continue;
          if (reg === runRegion && x0 <= runX1 + 1) { runX1 = Math.max(runX1, x1, x0 + 1); continue; }
          flush();
          runX0 = x0; runX1 = Math.max(x1, x0 + 1); runRegion = reg;
          continue;
        }
        flush();
        const cx0 = Math.max(x0, LABEL_W - 2), cx1 = Math.min(x1, W + 2);
        ctx.globalAlpha = data.flags[i] ? 0.45 : 1;
        ctx.fillStyle = data.colors[reg] || "#888";
        ctx.fillRect(cx0, y, cx1 - cx0 - 1, LEVEL_H - 1);
        ctx.globalAlpha = 1;
        if (cx1 - cx0 > 40) {
          ctx.fillStyle = "#fff";
          ctx.fillText(data.names[reg] || `region ${reg}`, cx0 + 3, y + LEVEL_H - 3, cx1 - cx0 - 6);
        }
      }
      flush();
    }
    ctx.restore();

    // Time axis.
    ctx.fillStyle = fg;
    ctx.strokeStyle = muted;
    ctx.beginPath();
    ctx.moveTo(LABEL_W, AXIS_H - 0.5);
    ctx.lineTo(W, AXIS_H - 0.5);
    ctx.stroke();
    const step = tickStep(t1 - t0, plotWidth() / 110);
    for (let t = Math.ceil(t0 / step) * step; t <= t1; t += step) {
      const x = Math.round(xOf(t)) + 0.5;
      ctx.beginPath();
      ctx.moveTo(x, AXIS_H - 5);
      ctx.lineTo(x, AXIS_H);
      ctx.stroke();
      ctx.fillText(formatNs(t), x + 2, AXIS_H - 8);
    }
    rangeLabel.textContent = `${formatNs(t0)} – ${formatNs(t1)} (span ${formatNs(t1 - t0)})`;
    root.dataset.t0 = String(t0);
    root.dataset.t1 = String(t1);
    root.dataset.drawMs = (performance.now() - started).toFixed(1); // read by the scale test
  }

  // ---- view changes ----------------------------------------------------------------------
  let syncTimer = 0;
  function setView(a, b) {
    const dur = Math.max(model.get("duration_ns"), 1);
    const span = Math.min(Math.max(b - a, 1), dur * 1.2); // at least 1 ns, at most the kernel
    const pad = dur * 0.1;
    a = Math.min(Math.max(a, -pad), dur + pad - span);
    [t0, t1] = [a, a + span];
    requestDraw();
    // Tell Python after the gesture settles, not on every wheel tick.
    clearTimeout(syncTimer);
    syncTimer = setTimeout(() => { model.set("view_range", [t0, t1]); model.save_changes(); }, 150);
  }

  function onWheel(ev) {
    ev.preventDefault();
    const rect = canvas.getBoundingClientRect();
    const scale = ev.deltaMode === 1 ? 16 : ev.deltaMode === 2 ? 400 : 1;
    if (Math.abs(ev.deltaX) > Math.abs(ev.deltaY) || ev.shiftKey) {
      const d = (ev.shiftKey ? ev.deltaY : ev.deltaX) * scale;
      const dt = (d / plotWidth()) * (t1 - t0);
      setView(t0 + dt, t1 + dt);
      return;
    }
    const tc = tOf(Math.max(ev.clientX - rect.left, LABEL_W));
    const f = Math.exp(ev.deltaY * scale * 0.0015);
    setView(tc - (tc - t0) * f, tc + (t1 - tc) * f);
  }

  let drag = null;
  function onPointerDown(ev) {
    if (ev.button !== 0) return;
    drag = { x: ev.clientX, y: ev.clientY, t0, t1, top: scroller.scrollTop, id: ev.pointerId };
    canvas.setPointerCapture(ev.pointerId);
    canvas.classList.add("mgl-dragging");
    tooltip.style.display = "none";
  }
  function onPointerMove(ev) {
    if (drag) {
      const dt = ((ev.clientX - drag.x) / plotWidth()) * (drag.t1 - drag.t0);
      setView(drag.t0 - dt, drag.t1 - dt);
      scroller.scrollTop = drag.top - (ev.clientY - drag.y);
      return;
    }
    hover(ev);
  }
  function onPointerUp(ev) {
    if (!drag) return;
    canvas.releasePointerCapture(drag.id);
    canvas.classList.remove("mgl-dragging");
    drag = null;
  }

  // ---- tooltip ---------------------------------------------------------------------------
  function findEvent(x, y) {
    const cy = y - AXIS_H + scroller.scrollTop;
    if (x < LABEL_W || y < AXIS_H) return null;
    const nRows = data.rowLevels.length;
    const row = lowerBound(data.rowTop, cy + 1e-9, 0, nRows + 1) - 1;
    if (row < 0 || row >= nRows) return null;
    const level = Math.floor((cy - data.rowTop[row]) / LEVEL_H);
    let lane = -1;
    for (let l = data.rowFirstLane[row]; l < data.rowFirstLane[row + 1]; l++) {
      if (data.laneLevel[l] === level) { lane = l; break; }
    }
    if (lane < 0) return null;
    const t = tOf(x), tol = (3 / plotWidth()) * (t1 - t0);
    const lo = data.laneOffsets[lane], hi = data.laneOffsets[lane + 1];
    let best = -1, bestDist = Infinity;
    for (let i = lowerBound(data.start, t - tol - data.laneMaxDur[lane], lo, hi); i < hi && data.start[i] <= t + tol; i++) {
      if (hidden.has(data.region[i])) continue;
      const dist = t < data.start[i] ? data.start[i] - t : t > data.end[i] ? t - data.end[i] : 0;
      if (dist <= tol && dist < bestDist) { best = i; bestDist = dist; }
    }
    return best < 0 ? null : { i: best, row };
  }

  function hover(ev) {
    const rect = canvas.getBoundingClientRect();
    const x = ev.clientX - rect.left, y = ev.clientY - rect.top;
    const hit = findEvent(x, y);
    if (!hit) { tooltip.style.display = "none"; return; }
    const { i, row } = hit;
    const unit = row % data.units;
    const name = data.names[data.region[i]] || `region ${data.region[i]}`;
    tooltip.innerHTML = "";
    tooltip.append(
      h("div", { class: "mgl-tooltip-title", text: name }),
      h("div", { text: `${data.labels[row]} · block ${data.block[i]} · ${model.get("unit_kind")} ${unit}` }),
      h("div", { text: `start ${formatNs(data.start[i])}` }),
      h("div", { text: `duration ${formatNs(data.end[i] - data.start[i])}` }),
    );
    if (data.flags[i]) tooltip.append(h("div", { class: "mgl-warn", text: "end not recorded: inferred" }));
    tooltip.style.display = "block";
    const pw = plot.clientWidth;
    tooltip.style.left = `${Math.min(x + 14, pw - 220)}px`;
    tooltip.style.top = `${y + 14}px`;
  }

  // ---- Perfetto --------------------------------------------------------------------------
  let perfettoWindow = null;
  let pingTimer = 0;
  function updateOnline() {
    openBtn.disabled = !navigator.onLine;
    openBtn.title = navigator.onLine ? "Open this trace in ui.perfetto.dev (new tab)" : "Offline: save the file instead";
  }
  saveBtn.addEventListener("click", () => {
    status.textContent = "building Perfetto trace…";
    model.send({ kind: "perfetto", purpose: "download" });
  });
  openBtn.addEventListener("click", () => {
    // Open the tab inside the click handler, or pop-up blockers refuse it.
    perfettoWindow = window.open(PERFETTO_ORIGIN);
    if (!perfettoWindow) { status.textContent = "the browser blocked the new tab"; return; }
    status.textContent = "building Perfetto trace…";
    model.send({ kind: "perfetto", purpose: "open" });
  });

  function download(buffer, filename) {
    const url = URL.createObjectURL(new Blob([buffer], { type: "application/octet-stream" }));
    const a = h("a", { href: url, download: filename });
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 10000);
    status.textContent = `saved ${filename} (${(buffer.byteLength / 1e6).toFixed(2)} MB)`;
  }

  function sendToPerfetto(buffer, title) {
    // Perfetto's documented handshake: PING until the UI answers PONG, then post the trace.
    const win = perfettoWindow;
    let tries = 0;
    const onMessage = (ev) => {
      if (ev.source !== win || ev.data !== "PONG") return;
      clearInterval(pingTimer);
      window.removeEventListener("message", onMessage);
      win.postMessage({ perfetto: { buffer, title } }, PERFETTO_ORIGIN);
      status.textContent = "sent to Perfetto UI";
    };
    window.addEventListener("message", onMessage);
    clearInterval(pingTimer);
    pingTimer = setInterval(() => {
      if (++tries > 400 || win.closed) {
        clearInterval(pingTimer);
        window.removeEventListener("message", onMessage);
        status.textContent = "Perfetto UI did not answer (offline?): save the file instead";
        return;
      }
      win.postMessage("PING", PERFETTO_ORIGIN);
    }, 50);
  }

  function onCustom(msg, buffers) {
    if (msg.kind === "error") { status.textContent = msg.message; return; }
    if (msg.kind !== "perfetto" || !buffers || !buffers.length) return;
    const view = buffers[0];
    const buffer = view.buffer.slice(view.byteOffset, view.byteOffset + view.byteLength);
    if (msg.purpose === "open" && perfettoWindow) sendToPerfetto(buffer, msg.title);
    else download(buffer, msg.filename);
  }

  // ---- wiring ----------------------------------------------------------------------------
  canvas.addEventListener("wheel", onWheel, { passive: false });
  canvas.addEventListener("pointerdown", onPointerDown);
  canvas.addEventListener("pointermove", onPointerMove);
  canvas.addEventListener("pointerup", onPointerUp);
  canvas.addEventListener("pointercancel", onPointerUp);
  canvas.addEventListener("pointerleave", () => { tooltip.style.display = "none"; });
  canvas.addEventListener("dblclick", () => setView(0, Math.max(model.get("duration_ns"), 1)));
  resetBtn.addEventListener("click", () => setView(0, Math.max(model.get("duration_ns"), 1)));
  scroller.addEventListener("scroll", requestDraw);
  window.addEventListener("online", updateOnline);
  window.addEventListener("offline", updateOnline);
  model.on("msg:custom", onCustom);
  const onViewRange = () => {
    const [a, b] = model.get("view_range");
    if (b > a && (a !== t0 || b !== t1)) { [t0, t1] = [a, b]; requestDraw(); }
  };
  const onHidden = () => { syncHidden(); buildFilters(); requestDraw(); };
  const onData = () => { data = loadData(model); buildFilters(); buildSummary(); layoutSize(); requestDraw(); };
  model.on("change:view_range", onViewRange);
  model.on("change:hidden_regions", onHidden);
  model.on("change:_start", onData);
  model.on("change:summary_rows", buildSummary);
  const resize = new ResizeObserver(() => { layoutSize(); requestDraw(); });
  resize.observe(scroller);
  // The canvas takes its colours from the theme when it draws: redraw when the theme changes
  // (JupyterLab sets data-jp-theme-* on <body>, VS Code its body class).
  const theme = new MutationObserver(requestDraw);
  theme.observe(document.body, { attributes: true, attributeFilter: ["class", "data-jp-theme-light", "data-jp-theme-name"] });

  updateOnline();
  buildFilters();
  buildSummary();
  layoutSize();
  draw();

  const showStatic = hideStaticTwin(model);
  return () => {
    showStatic();
    resize.disconnect();
    theme.disconnect();
    clearInterval(pingTimer);
    clearTimeout(syncTimer);
    if (frame) cancelAnimationFrame(frame);
    window.removeEventListener("online", updateOnline);
    window.removeEventListener("offline", updateOnline);
    model.off("msg:custom", onCustom);
    model.off("change:view_range", onViewRange);
    model.off("change:hidden_regions", onHidden);
    model.off("change:_start", onData);
    model.off("change:summary_rows", buildSummary);
  };
}

export default { render };
