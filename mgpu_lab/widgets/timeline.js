// Timeline view (anywidget ESM), with Perfetto's controls: W/S zoom, A/D pan, the wheel
// scrolls tracks (Ctrl+wheel zooms, Shift+wheel pans), a click selects a slice and shows its
// details, a drag selects an area and summarizes it per region, track groups (SM > block slot >
// warpgroup) collapse, a search box finds regions by name. Time never pans below zero.
//
// Drawing visits only the tracks in view and, in each lane (row, nesting level), only the
// events in the visible time range: events of a lane do not overlap and are sorted by start,
// so a binary search finds the first. Sub-pixel events of one region that touch are merged
// into one rectangle, so a zoomed-out million-event trace costs one pass over the events.

const LABEL_W = 170; // px, track labels
const AXIS_H = 24; // px, time axis
const LEVEL_H = 13; // px per nesting level
const ROW_GAP = 3; // px between tracks
const HEADER_H = 16; // px, an expanded group's header
const INDENT = 12; // px per group depth in the label gutter
const DRAG_PX = 4; // a pointer that moves less than this is a click
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
    rowSm: typed(model.get("_row_sm"), Uint32Array),
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
    units: Math.max(model.get("units_per_block"), 1),
    unitKind: model.get("unit_kind"),
  };
  const rows = d.rowLevels.length;
  // Each row's first lane (lanes are sorted by row), and the event span (the "home" view).
  d.rowFirstLane = new Int32Array(rows + 1);
  let lane = 0;
  for (let r = 0; r <= rows; r++) {
    while (lane < d.laneRow.length && d.laneRow[lane] < r) lane++;
    d.rowFirstLane[r] = lane;
  }
  d.rowHasEvents = new Uint8Array(rows);
  for (let l = 0; l < d.laneRow.length; l++) d.rowHasEvents[d.laneRow[l]] = 1;
  // Blocks by band (a band is an SM's block slot: `units` consecutive rows).
  d.bandBlocks = new Map();
  for (let b = 0; b < d.blockRow.length; b++) {
    const band = Math.floor(d.blockRow[b] / d.units);
    if (!d.bandBlocks.has(band)) d.bandBlocks.set(band, []);
    d.bandBlocks.get(band).push(b);
  }
  let t0 = Infinity, t1 = -Infinity;
  for (let i = 0; i < d.start.length; i++) { if (d.start[i] < t0) t0 = d.start[i]; if (d.end[i] > t1) t1 = d.end[i]; }
  d.home = t1 > t0 ? [t0, t1] : null;
  return d;
}

function blockList(data, band) {
  const ids = (data.bandBlocks.get(band) || []).map((b) => data.blockId[b]);
  const shown = ids.slice(0, 3).join(", ");
  return ids.length ? `block${ids.length > 1 ? "s" : ""} ${shown}${ids.length > 3 ? ` +${ids.length - 3}` : ""}` : "";
}

// The tracks in display order. A group (SM, or block slot where an SM ran several at once)
// is a header when expanded and one squashed track when collapsed; rows without events are
// left out when `hideEmpty`. Each track: {kind: "group"|"row", key, depth, label, rows,
// collapsed, top, height}; `rowTrack[r]` is the track that draws row r (-1: not shown).
function buildTracks(data, collapsed, hideEmpty) {
  const tracks = [];
  const nRows = data.rowLevels.length;
  const rowTrack = new Int32Array(nRows).fill(-1);
  const keep = (r) => !hideEmpty || data.rowHasEvents[r];
  const add = (t) => { tracks.push(t); return tracks.length - 1; };
  let r = 0;
  while (r < nRows) {
    const sm = data.rowSm[r];
    let end = r;
    while (end < nRows && data.rowSm[end] === sm) end++;
    const bands = [];
    for (let b0 = r; b0 < end; b0 += data.units) {
      const rows = [];
      for (let k = b0; k < Math.min(b0 + data.units, end); k++) if (keep(k)) rows.push(k);
      if (rows.length) bands.push({ band: Math.floor(b0 / data.units), rows });
    }
    if (bands.length) {
      const smRows = bands.flatMap((b) => b.rows);
      const smKey = `sm${sm}`;
      const single = bands.length === 1;
      const smLabel = `SM ${sm}` + (single ? ` · ${blockList(data, bands[0].band)}` : ` · ${bands.length} block slots`);
      const smTrack = add({ kind: "group", key: smKey, depth: 0, label: smLabel, rows: smRows, collapsed: collapsed.has(smKey) });
      if (collapsed.has(smKey)) smRows.forEach((k) => { rowTrack[k] = smTrack; });
      else {
        for (const { band, rows } of bands) {
          let depth = 1;
          if (!single) {
            const key = `band${band}`;
            const t = add({ kind: "group", key, depth: 1, label: `slot ${band} · ${blockList(data, band)}`, rows, collapsed: collapsed.has(key) });
            if (collapsed.has(key)) { rows.forEach((k) => { rowTrack[k] = t; }); continue; }
            depth = 2;
          }
          for (const k of rows) {
            const unit = k % data.units;
            rowTrack[k] = add({ kind: "row", key: `r${k}`, depth, label: `${data.unitKind} ${unit}`, rows: [k], collapsed: false });
          }
        }
      }
    }
    r = end;
  }
  let top = 0;
  for (const t of tracks) {
    t.top = top;
    t.height = t.kind === "row" ? data.rowLevels[t.rows[0]] * LEVEL_H + ROW_GAP : t.collapsed ? LEVEL_H + ROW_GAP : HEADER_H;
    top += t.height;
  }
  const tops = new Float64Array(tracks.length + 1);
  tracks.forEach((t, i) => { tops[i] = t.top; });
  tops[tracks.length] = top;
  return { tracks, rowTrack, tops, height: top };
}

function render({ model, el }) {
  let data = loadData(model);
  const duration = () => Math.max(model.get("duration_ns"), 1);
  let [t0, t1] = model.get("view_range");
  if (!(t1 > t0)) [t0, t1] = data.home || [0, duration()];
  let hidden = new Set();
  const syncHidden = () => {
    const names = model.get("hidden_regions");
    hidden = new Set(data.names.map((n, i) => (names.includes(n) ? i : -1)).filter((i) => i >= 0));
  };
  syncHidden();
  const collapsed = new Set();
  let hideEmpty = data.rowHasEvents.some((v) => v) && data.rowHasEvents.some((v) => !v);
  let layout = buildTracks(data, collapsed, hideEmpty);
  let selected = -1; // event index
  let area = null; // {ta, tb, y0, y1} in content coordinates
  let searchRegions = null; // Set of region ids matching the search, or null
  let lastMouseX = -1;

  // ---- DOM -------------------------------------------------------------------------------
  const root = h("div", { class: "mgl mgl-tl", "data-lm-suppress-shortcuts": "true" });
  const title = h("span", { class: "mgl-title", text: model.get("title") });
  const rangeLabel = h("span", { class: "mgl-tl-range" });
  const resetBtn = h("button", { class: "mgl-btn", text: "Reset zoom", title: "The span with events (or double-click the plot)" });
  const emptyBox = h("input", { type: "checkbox", class: "mgl-tl-hide-empty" });
  emptyBox.checked = hideEmpty;
  const expandBtn = h("button", { class: "mgl-btn mgl-tl-expand", text: "Expand all" });
  const collapseBtn = h("button", { class: "mgl-btn mgl-tl-collapse", text: "Collapse all" });
  const search = h("input", { type: "search", class: "mgl-tl-search", placeholder: "search regions (Enter: next)" });
  const searchLabel = h("span", { class: "mgl-status mgl-tl-search-count" });
  const saveBtn = h("button", { class: "mgl-btn mgl-tl-save", text: "Save .perfetto-trace" });
  // navigator.onLine only knows about a network interface, not whether ui.perfetto.dev is
  // reachable: the button says it needs internet access, and is disabled when surely offline.
  const openBtn = h("button", { class: "mgl-btn mgl-tl-open", text: "Open in Perfetto UI (needs internet)" });
  const offlineNote = h("span", { class: "mgl-status mgl-tl-offline" });
  const status = h("span", { class: "mgl-status" });
  const toolbar = h("div", { class: "mgl-toolbar" }, [title, rangeLabel, resetBtn, saveBtn, openBtn, offlineNote, status]);
  const toolbar2 = h("div", { class: "mgl-toolbar" }, [
    h("label", { title: "Leave out the tracks that recorded nothing" }, [emptyBox, " hide rows without events"]),
    expandBtn, collapseBtn, search, searchLabel,
    h("span", { class: "mgl-status", text: "W/S zoom · A/D pan · wheel: tracks · Ctrl+wheel: zoom · drag: select area · Shift+drag: pan" }),
  ]);
  const filters = h("div", { class: "mgl-tl-filters" });
  const canvas = h("canvas", { class: "mgl-tl-canvas", tabindex: "0" });
  const spacer = h("div", { class: "mgl-tl-spacer" });
  const scroller = h("div", { class: "mgl-tl-scroll" }, [canvas, spacer]);
  const tooltip = h("div", { class: "mgl-tooltip" });
  tooltip.style.display = "none";
  const plot = h("div", { class: "mgl-tl-plot" }, [scroller, tooltip]);
  const details = h("div", { class: "mgl-tl-details" });
  const notes = h("div", { class: "mgl-notes" });
  const summary = h("div", { class: "mgl-tl-summary" });
  root.append(toolbar, toolbar2, filters, plot, details, notes, summary);
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

  function regionTable(headers, rows, shares) {
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
        } else if (i === cells.length - 1 && shares) {
          const bar = h("span", { class: "mgl-share-bar" });
          bar.style.width = `${Math.min(100, 100 * shares[r])}%`;
          td.append(h("span", { class: "mgl-share" }, [bar]), c);
        } else td.textContent = c;
        tr.append(td);
      });
      body.append(tr);
    });
    table.append(body);
    return table;
  }

  function buildSummary() {
    // The note says what the share column divides by (the same figure as Trace.summary()).
    summary.replaceChildren(
      regionTable(model.get("summary_headers"), model.get("summary_rows"), model.get("summary_shares")),
      h("div", { class: "mgl-status mgl-tl-share-note", text: model.get("summary_note") }),
    );
    notes.replaceChildren(...model.get("notes").map((n) => h("div", { text: n })));
  }

  // ---- geometry --------------------------------------------------------------------------
  // Canvas size in CSS pixels, set by layoutSize; 0 until the view is attached and visible.
  let cssW = 0, cssH = 0;
  const plotWidth = () => Math.max(cssW - LABEL_W, 10);
  const xOf = (t) => LABEL_W + ((t - t0) / (t1 - t0)) * plotWidth();
  const tOf = (x) => t0 + ((x - LABEL_W) / plotWidth()) * (t1 - t0);
  const contentY = (y) => y - AXIS_H + scroller.scrollTop;

  function relayout() {
    layout = buildTracks(data, collapsed, hideEmpty);
    layoutSize();
    requestDraw();
  }

  function layoutSize() {
    const contentH = AXIS_H + layout.height;
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

  function drawLane(ctx, lane, y, W) {
    const lo = data.laneOffsets[lane], hi = data.laneOffsets[lane + 1];
    let i = lowerBound(data.start, t0 - data.laneMaxDur[lane], lo, hi);
    let runX0 = 0, runX1 = -1, runRegion = -1;
    const flush = () => {
      if (runRegion >= 0) {
        ctx.globalAlpha = searchRegions && !searchRegions.has(runRegion) ? 0.2 : 1;
        ctx.fillStyle = data.colors[runRegion] || "#888";
        ctx.fillRect(runX0, y, Math.max(runX1 - runX0, 1), LEVEL_H - 1);
        ctx.globalAlpha = 1;
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
        // same region extends the run. So a lane costs at most one rectangle per pixel column.
        if (runRegion >= 0 && x0 < Math.floor(runX1)) continue;
        if (reg === runRegion && x0 <= runX1 + 1) { runX1 = Math.max(runX1, x1, x0 + 1); continue; }
        flush();
        runX0 = x0; runX1 = Math.max(x1, x0 + 1); runRegion = reg;
        continue;
      }
      flush();
      const cx0 = Math.max(x0, LABEL_W - 2), cx1 = Math.min(x1, W + 2);
      const faded = searchRegions && !searchRegions.has(reg);
      ctx.globalAlpha = faded ? 0.2 : data.flags[i] ? 0.45 : 1;
      ctx.fillStyle = data.colors[reg] || "#888";
      ctx.fillRect(cx0, y, cx1 - cx0 - 1, LEVEL_H - 1);
      ctx.globalAlpha = 1;
      if (cx1 - cx0 > 40 && !faded) {
        ctx.fillStyle = "#fff";
        ctx.fillText(data.names[reg] || `region ${reg}`, cx0 + 3, y + LEVEL_H - 3, cx1 - cx0 - 6);
      }
    }
    flush();
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
    const { tracks, tops } = layout;
    const first = Math.max(lowerBound(tops, scrollTop, 0, tracks.length + 1) - 1, 0);
    let last = first;
    while (last < tracks.length && tops[last] < scrollTop + H - AXIS_H) last++;
    const yOf = (k) => AXIS_H + tops[k] - scrollTop;

    ctx.save();
    ctx.beginPath();
    ctx.rect(0, AXIS_H, W, H - AXIS_H);
    ctx.clip();
    for (let k = first; k < last; k++) {
      const t = tracks[k], y = yOf(k);
      if (data.rowSm[t.rows[0]] % 2 === 0) {
        ctx.fillStyle = band;
        ctx.fillRect(0, y, W, t.height);
      }
      ctx.fillStyle = t.kind === "group" ? fg : muted;
      ctx.font = t.kind === "group" ? "bold 11px sans-serif" : "11px sans-serif";
      const x = 4 + t.depth * INDENT;
      const text = t.kind === "group" ? `${t.collapsed ? "▸" : "▾"} ${t.label}` : t.label;
      ctx.fillText(text, x, y + Math.min(t.height, LEVEL_H) - 2, LABEL_W - x - 4);
    }
    ctx.font = "11px sans-serif";
    ctx.beginPath();
    ctx.rect(LABEL_W, AXIS_H, W - LABEL_W, H - AXIS_H);
    ctx.clip();
    for (let k = first; k < last; k++) {
      const t = tracks[k];
      if (t.kind === "group" && !t.collapsed) continue;
      const y = yOf(k);
      if (t.kind === "row") {
        // Block lifetimes: a thin outline behind the row (the blocks of its slot).
        ctx.strokeStyle = muted;
        ctx.lineWidth = 1;
        for (const b of data.bandBlocks.get(Math.floor(t.rows[0] / data.units)) || []) {
          if (data.blockEnd[b] < t0 || data.blockStart[b] > t1) continue;
          const x0 = xOf(data.blockStart[b]), x1 = xOf(data.blockEnd[b]);
          if (x1 - x0 >= 3) ctx.strokeRect(x0 + 0.5, y - 0.5, x1 - x0 - 1, t.height - ROW_GAP);
        }
      }
      for (const r of t.rows) {
        for (let lane = data.rowFirstLane[r]; lane < data.rowFirstLane[r + 1]; lane++) {
          drawLane(ctx, lane, t.kind === "row" ? y + data.laneLevel[lane] * LEVEL_H : y, W);
        }
      }
    }
    // The selected slice and the selected area.
    if (selected >= 0) {
      const k = layout.rowTrack[rowOfEvent(selected)];
      if (k >= 0) {
        const t = tracks[k];
        const y = yOf(k) + (t.kind === "row" ? levelOfEvent(selected) * LEVEL_H : 0);
        ctx.strokeStyle = fg;
        ctx.lineWidth = 2;
        const x0 = xOf(data.start[selected]), x1 = Math.max(xOf(data.end[selected]), x0 + 2);
        ctx.strokeRect(x0, y - 1, x1 - x0, LEVEL_H + 1);
      }
    }
    if (area) {
      const x0 = xOf(Math.min(area.ta, area.tb)), x1 = xOf(Math.max(area.ta, area.tb));
      const y0 = AXIS_H + Math.min(area.y0, area.y1) - scrollTop, y1 = AXIS_H + Math.max(area.y0, area.y1) - scrollTop;
      ctx.fillStyle = "rgba(25, 118, 210, 0.12)";
      ctx.fillRect(x0, y0, x1 - x0, y1 - y0);
      ctx.strokeStyle = "rgba(25, 118, 210, 0.9)";
      ctx.lineWidth = 1;
      ctx.strokeRect(x0 + 0.5, y0 + 0.5, x1 - x0 - 1, y1 - y0 - 1);
    }
    ctx.restore();

    // Time axis.
    ctx.clearRect(0, 0, W, AXIS_H);
    ctx.fillStyle = fg;
    ctx.strokeStyle = muted;
    ctx.lineWidth = 1;
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
    root.dataset.tracks = String(tracks.length);
    root.dataset.drawMs = (performance.now() - started).toFixed(1); // read by the scale test
  }

  // ---- events by index -------------------------------------------------------------------
  // The lane of event i: lanes are contiguous ranges of the event columns.
  function laneOfEvent(i) { return lowerBound(data.laneOffsets, i + 1, 0, data.laneOffsets.length) - 1; }
  function rowOfEvent(i) { return data.laneRow[laneOfEvent(i)]; }
  function levelOfEvent(i) { return data.laneLevel[laneOfEvent(i)]; }

  // ---- view changes ----------------------------------------------------------------------
  let syncTimer = 0;
  function setView(a, b) {
    const dur = duration();
    const span = Math.min(Math.max(b - a, 1), dur); // at least 1 ns, at most the kernel
    a = Math.min(Math.max(a, 0), dur - span); // never before 0 (the kernel start) or past its end
    [t0, t1] = [a, a + span];
    requestDraw();
    // Tell Python after the gesture settles, not on every wheel tick.
    clearTimeout(syncTimer);
    syncTimer = setTimeout(() => { model.set("view_range", [t0, t1]); model.save_changes(); }, 150);
  }
  function zoom(factor, x) {
    const tc = x >= LABEL_W ? tOf(x) : (t0 + t1) / 2;
    setView(tc - (tc - t0) * factor, tc + (t1 - tc) * factor);
  }
  function pan(fraction) {
    const dt = fraction * (t1 - t0);
    setView(t0 + dt, t1 + dt);
  }
  const home = () => (data.home ? setView(data.home[0], data.home[1]) : setView(0, duration()));

  function onWheel(ev) {
    const scale = ev.deltaMode === 1 ? 16 : ev.deltaMode === 2 ? 400 : 1;
    if (ev.ctrlKey || ev.metaKey) {
      ev.preventDefault(); // and the browser's page zoom
      zoom(Math.exp(ev.deltaY * scale * 0.0015), ev.clientX - canvas.getBoundingClientRect().left);
      return;
    }
    if (Math.abs(ev.deltaX) > Math.abs(ev.deltaY) || ev.shiftKey) {
      ev.preventDefault();
      pan(((ev.shiftKey ? ev.deltaY : ev.deltaX) * scale) / plotWidth());
    }
    // A plain wheel scrolls the tracks: the scroller does it natively.
  }

  function onKey(ev) {
    const key = ev.key.toLowerCase();
    const actions = {
      w: () => zoom(0.8, lastMouseX), s: () => zoom(1.25, lastMouseX),
      a: () => pan(-0.1), d: () => pan(0.1),
      escape: () => { area = null; selected = -1; showDetails(); requestDraw(); },
    };
    if (!(key in actions) || ev.ctrlKey || ev.metaKey || ev.altKey) return;
    ev.preventDefault();
    ev.stopPropagation(); // JupyterLab's command-mode shortcuts (A, D, ...) stay out of it
    actions[key]();
  }

  // ---- pointer: click selects, drag selects an area, Shift+drag (or middle) pans -------------
  let drag = null;
  function onPointerDown(ev) {
    if (ev.button !== 0 && ev.button !== 1) return;
    canvas.focus({ preventScroll: true });
    const rect = canvas.getBoundingClientRect();
    const x = ev.clientX - rect.left, y = ev.clientY - rect.top;
    if (y < AXIS_H) return;
    drag = {
      x: ev.clientX, y: ev.clientY, t0, t1, top: scroller.scrollTop, id: ev.pointerId, moved: false,
      pan: ev.shiftKey || ev.button === 1, inLabels: x < LABEL_W, cx: x, cy: contentY(y),
    };
    canvas.setPointerCapture(ev.pointerId);
    tooltip.style.display = "none";
  }
  function onPointerMove(ev) {
    const rect = canvas.getBoundingClientRect();
    lastMouseX = ev.clientX - rect.left;
    if (!drag) { hover(ev); return; }
    if (!drag.moved && Math.hypot(ev.clientX - drag.x, ev.clientY - drag.y) < DRAG_PX) return;
    drag.moved = true;
    if (drag.pan) {
      canvas.classList.add("mgl-dragging");
      const dt = ((ev.clientX - drag.x) / plotWidth()) * (drag.t1 - drag.t0);
      setView(drag.t0 - dt, drag.t1 - dt);
      scroller.scrollTop = drag.top - (ev.clientY - drag.y);
      return;
    }
    if (drag.inLabels) return;
    const x = Math.max(ev.clientX - rect.left, LABEL_W);
    area = { ta: tOf(drag.cx < LABEL_W ? LABEL_W : drag.cx), tb: tOf(x), y0: drag.cy, y1: contentY(ev.clientY - rect.top) };
    requestDraw();
  }
  function onPointerUp(ev) {
    if (!drag) return;
    canvas.releasePointerCapture(drag.id);
    canvas.classList.remove("mgl-dragging");
    const d = drag;
    drag = null;
    if (d.moved) {
      if (!d.pan && area) summarizeArea();
      return;
    }
    // A click: a group label toggles the group, a slice is selected.
    const k = trackAt(d.cy);
    if (d.inLabels) {
      if (k >= 0 && layout.tracks[k].kind === "group") {
        const key = layout.tracks[k].key;
        if (collapsed.has(key)) collapsed.delete(key);
        else collapsed.add(key);
        relayout();
      }
      return;
    }
    const hit = findEvent(d.cx, d.cy);
    selectEvent(hit ? hit.i : -1);
  }

  function trackAt(cy) {
    const k = lowerBound(layout.tops, cy + 1e-9, 0, layout.tracks.length + 1) - 1;
    return k >= 0 && k < layout.tracks.length ? k : -1;
  }

  // The event under content point (x px, cy px), if any.
  function findEvent(x, cy) {
    if (x < LABEL_W) return null;
    const k = trackAt(cy);
    if (k < 0) return null;
    const track = layout.tracks[k];
    if (track.kind === "group" && !track.collapsed) return null;
    const level = track.kind === "row" ? Math.floor((cy - track.top) / LEVEL_H) : -1;
    const t = tOf(x), tol = (3 / plotWidth()) * (t1 - t0);
    let best = -1, bestDist = Infinity, bestRow = -1;
    for (const r of track.rows) {
      for (let lane = data.rowFirstLane[r]; lane < data.rowFirstLane[r + 1]; lane++) {
        if (level >= 0 && data.laneLevel[lane] !== level) continue;
        const lo = data.laneOffsets[lane], hi = data.laneOffsets[lane + 1];
        for (let i = lowerBound(data.start, t - tol - data.laneMaxDur[lane], lo, hi); i < hi && data.start[i] <= t + tol; i++) {
          if (hidden.has(data.region[i])) continue;
          const dist = t < data.start[i] ? data.start[i] - t : t > data.end[i] ? t - data.end[i] : 0;
          // Deeper (nested) slices win ties in a squashed group: they are drawn on top.
          if (dist <= tol && (dist < bestDist || (dist === bestDist && level < 0))) { best = i; bestDist = dist; bestRow = r; }
        }
      }
    }
    return best < 0 ? null : { i: best, row: bestRow };
  }

  function eventText(i) {
    const row = rowOfEvent(i);
    return {
      name: data.names[data.region[i]] || `region ${data.region[i]}`,
      where: `SM ${data.rowSm[row]} · block ${data.block[i]} · ${data.unitKind} ${row % data.units}`,
    };
  }

  function hover(ev) {
    const rect = canvas.getBoundingClientRect();
    const x = ev.clientX - rect.left, y = ev.clientY - rect.top;
    const hit = y >= AXIS_H ? findEvent(x, contentY(y)) : null;
    if (!hit) { tooltip.style.display = "none"; return; }
    const { i } = hit;
    const { name, where } = eventText(i);
    tooltip.replaceChildren(
      h("div", { class: "mgl-tooltip-title", text: name }),
      h("div", { text: where }),
      h("div", { text: `start ${formatNs(data.start[i])}` }),
      h("div", { text: `duration ${formatNs(data.end[i] - data.start[i])}` }),
    );
    if (data.flags[i]) tooltip.append(h("div", { class: "mgl-warn", text: "end not recorded: inferred" }));
    tooltip.style.display = "block";
    const pw = plot.clientWidth;
    tooltip.style.left = `${Math.min(x + 14, pw - 220)}px`;
    tooltip.style.top = `${y + 14}px`;
  }

  // ---- selection: one slice, or an area --------------------------------------------------
  function selectEvent(i) {
    selected = i;
    area = null;
    showDetails();
    requestDraw();
    if (i >= 0) {
      // The SASS view of the same kernel highlights the region's source lines.
      window.dispatchEvent(new CustomEvent(MGL_REGION_EVENT, {
        detail: { kernel: model.get("title"), region: data.names[data.region[i]] || "" },
      }));
    }
  }

  function showDetails() {
    details.replaceChildren();
    details.dataset.kind = "";
    if (selected < 0) return;
    const i = selected;
    const { name, where } = eventText(i);
    details.dataset.kind = "slice";
    const swatch = h("span", { class: "mgl-swatch" });
    swatch.style.background = data.colors[data.region[i]] || "#888";
    const rows = [
      ["where", where], ["start", formatNs(data.start[i])], ["end", formatNs(data.end[i])],
      ["duration", formatNs(data.end[i] - data.start[i])], ["depth", String(levelOfEvent(i))],
    ];
    if (data.flags[i]) rows.push(["note", "end not recorded: inferred"]);
    details.append(
      h("div", { class: "mgl-panel-title" }, [swatch, `Slice: ${name}`]),
      h("table", { class: "mgl-table" }, [h("tbody", {}, rows.map(([k, v]) => h("tr", {}, [h("th", { text: k }), h("td", { text: v })])))]),
    );
  }

  function summarizeArea() {
    const ta = Math.min(area.ta, area.tb), tb = Math.max(area.ta, area.tb);
    const k0 = trackAt(Math.min(area.y0, area.y1)), k1 = trackAt(Math.max(area.y0, area.y1));
    const rows = new Set();
    for (let k = Math.max(k0, 0); k <= (k1 < 0 ? layout.tracks.length - 1 : k1); k++) {
      const t = layout.tracks[k];
      if (t.kind === "row" || t.collapsed) t.rows.forEach((r) => rows.add(r));
    }
    const stats = new Map(); // region -> [slices, time inside the area]
    for (const r of rows) {
      for (let lane = data.rowFirstLane[r]; lane < data.rowFirstLane[r + 1]; lane++) {
        const lo = data.laneOffsets[lane], hi = data.laneOffsets[lane + 1];
        for (let i = lowerBound(data.start, ta - data.laneMaxDur[lane], lo, hi); i < hi && data.start[i] <= tb; i++) {
          if (data.end[i] < ta || hidden.has(data.region[i])) continue;
          const s = stats.get(data.region[i]) || [0, 0];
          s[0] += 1;
          s[1] += Math.min(data.end[i], tb) - Math.max(data.start[i], ta);
          stats.set(data.region[i], s);
        }
      }
    }
    const unitTime = rows.size * (tb - ta);
    const sorted = [...stats.entries()].sort((a, b) => b[1][1] - a[1][1]);
    details.replaceChildren(
      h("div", { class: "mgl-panel-title", text: `Area: ${rows.size} tracks × ${formatNs(tb - ta)} (${formatNs(ta)} – ${formatNs(tb)})` }),
      sorted.length
        ? regionTable(["region", "slices", "time in area", "share of area"],
          sorted.map(([reg, [n, t]]) => [data.names[reg] || `region ${reg}`, n.toLocaleString("en-US"), formatNs(t), `${(100 * t / unitTime).toFixed(1)}%`]),
          sorted.map(([, [, t]]) => t / unitTime))
        : h("div", { class: "mgl-status", text: "no slices in the area" }),
    );
    details.dataset.kind = "area";
    selected = -1;
    requestDraw();
  }

  // ---- search ----------------------------------------------------------------------------
  let searchOrder = null; // event indexes sorted by start, built on the first Enter
  let searchAt = -1;
  function runSearch() {
    const term = search.value.trim().toLowerCase();
    searchRegions = term ? new Set(data.names.flatMap((n, i) => (n.toLowerCase().includes(term) ? [i] : []))) : null;
    let count = 0;
    if (searchRegions) for (let i = 0; i < data.region.length; i++) if (searchRegions.has(data.region[i])) count++;
    searchLabel.textContent = searchRegions ? `${count.toLocaleString("en-US")} slices` : "";
    searchAt = -1;
    requestDraw();
  }
  function nextMatch(step) {
    if (!searchRegions || !searchRegions.size) return;
    if (!searchOrder) {
      searchOrder = Uint32Array.from({ length: data.start.length }, (_, i) => i).sort((a, b) => data.start[a] - data.start[b]);
    }
    const n = searchOrder.length;
    for (let k = 1; k <= n; k++) {
      const at = (searchAt + step * k + n * 2) % n;
      const i = searchOrder[at];
      if (!searchRegions.has(data.region[i]) || hidden.has(data.region[i])) continue;
      searchAt = at;
      const span = Math.max(t1 - t0, 4 * (data.end[i] - data.start[i]));
      const mid = (data.start[i] + data.end[i]) / 2;
      setView(mid - span / 2, mid + span / 2);
      const track = layout.rowTrack[rowOfEvent(i)];
      if (track >= 0) scroller.scrollTop = Math.max(layout.tops[track] - (cssH - AXIS_H) / 3, 0);
      selectEvent(i);
      return;
    }
  }
  let searchTimer = 0;
  search.addEventListener("input", () => { clearTimeout(searchTimer); searchTimer = setTimeout(runSearch, 120); });
  search.addEventListener("keydown", (ev) => {
    ev.stopPropagation();
    if (ev.key === "Enter") { clearTimeout(searchTimer); runSearch(); nextMatch(ev.shiftKey ? -1 : 1); }
  });

  // ---- Perfetto --------------------------------------------------------------------------
  let perfettoWindow = null;
  let pingTimer = 0;
  function updateOnline() {
    openBtn.disabled = !navigator.onLine;
    openBtn.title = navigator.onLine
      ? "Opens ui.perfetto.dev in a new tab and sends it this trace: needs internet access"
      : "Offline: Perfetto UI needs internet access; save the .perfetto-trace file instead";
    offlineNote.textContent = navigator.onLine ? "" : "offline: Open in Perfetto UI needs internet access, save the file instead";
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
  canvas.addEventListener("keydown", onKey);
  canvas.addEventListener("pointerdown", onPointerDown);
  canvas.addEventListener("pointermove", onPointerMove);
  canvas.addEventListener("pointerup", onPointerUp);
  canvas.addEventListener("pointercancel", onPointerUp);
  canvas.addEventListener("pointerleave", () => { tooltip.style.display = "none"; lastMouseX = -1; });
  canvas.addEventListener("dblclick", home);
  resetBtn.addEventListener("click", home);
  emptyBox.addEventListener("change", () => { hideEmpty = emptyBox.checked; relayout(); });
  expandBtn.addEventListener("click", () => { collapsed.clear(); relayout(); });
  collapseBtn.addEventListener("click", () => {
    for (const t of buildTracks(data, new Set(), hideEmpty).tracks) if (t.kind === "group" && t.depth === 0) collapsed.add(t.key);
    relayout();
  });
  scroller.addEventListener("scroll", requestDraw);
  window.addEventListener("online", updateOnline);
  window.addEventListener("offline", updateOnline);
  model.on("msg:custom", onCustom);
  const onViewRange = () => {
    const [a, b] = model.get("view_range");
    if (b > a && (a !== t0 || b !== t1)) { [t0, t1] = [a, b]; requestDraw(); }
  };
  const onHidden = () => { syncHidden(); buildFilters(); requestDraw(); };
  const onData = () => {
    data = loadData(model);
    selected = -1; area = null; searchOrder = null;
    buildFilters(); buildSummary(); relayout();
  };
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
    clearTimeout(searchTimer);
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
