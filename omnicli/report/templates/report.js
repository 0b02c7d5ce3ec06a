// The report page's own script: the utterance table (sort, filter, page, play, diff)
// and drawing the Plotly figures. Plotly has no audio table, so this part is ours.
(function () {
  "use strict";
  const data = JSON.parse(document.getElementById("report-data").textContent);
  const cols = data.columns;
  const rows = data.rows.map((values, index) => {
    const row = { index };
    cols.forEach((c, i) => { row[c] = values[i]; });
    row.search = [row.utt, row.text, row.hyp, row.error].filter(Boolean).join(" ").toLowerCase();
    return row;
  });
  const plotConfig = { displaylogo: false, responsive: true };

  function draw(id, figure) {
    const el = document.getElementById(id);
    if (!el || !figure) { if (el) el.remove(); return null; }
    Plotly.newPlot(el, figure.data, figure.layout, plotConfig);
    return el;
  }

  // ---- utterance table ----
  const table = document.getElementById("utt-table");
  const state = { group: "", status: "", reason: "", werMin: null, werMax: null, text: "", sort: null, desc: false, page: 0, size: 50 };

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v !== null && v !== undefined) node.setAttribute(k, v);
    }
    for (const child of children) {
      if (child === null || child === undefined) continue;
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }

  function fmt(value, digits) {
    if (value === null || value === undefined) return "";
    return typeof value === "number" ? value.toFixed(digits) : String(value);
  }

  function matches(row) {
    if (state.group && !row.groups.includes(state.group)) return false;
    if (state.status && row.status !== state.status) return false;
    if (state.reason && !row.reasons.includes(state.reason)) return false;
    if (state.werMin !== null && !(row.wer !== null && row.wer * 100 >= state.werMin)) return false;
    if (state.werMax !== null && !(row.wer !== null && row.wer * 100 <= state.werMax)) return false;
    if (state.text && !row.search.includes(state.text)) return false;
    return true;
  }

  function compare(a, b) {
    const k = state.sort;
    let x = a[k], y = b[k];
    if (Array.isArray(x)) x = x.join(",");
    if (Array.isArray(y)) y = y.join(",");
    const xMissing = x === null || x === undefined || x === "", yMissing = y === null || y === undefined || y === "";
    if (xMissing || yMissing) return xMissing === yMissing ? a.index - b.index : (xMissing ? 1 : -1); // missing last
    const order = typeof x === "number" && typeof y === "number" ? x - y : String(x).localeCompare(String(y), undefined, { numeric: true });
    return (state.desc ? -order : order) || a.index - b.index;
  }

  function diffCell(diff) {
    const cell = el("td", { class: "diff" });
    if (!diff) return cell;
    diff.forEach((word) => {
      if (typeof word === "string") { cell.append(el("span", { class: "w-eq", "data-op": "=" }, word), " "); return; }
      const [op, ref, hyp] = word;
      const span = el("span", { class: "w-" + op, "data-op": op, "data-ref": ref, "data-hyp": hyp });
      if (ref) span.append(el("del", {}, ref));
      if (op === "s") span.append(" ");
      if (hyp) span.append(el("ins", {}, hyp));
      cell.append(span, " ");
    });
    return cell;
  }

  function audioBox(src, label) {
    if (!src) return el("div", { class: "dim" }, label + ": none");
    return el("div", { class: "clip" }, el("span", { class: "clip-label" }, label),
      el("audio", { controls: "", preload: "metadata", src, "data-kind": label }));
  }

  function rowNode(row) {
    const has = (key) => table.querySelector(`th[data-key="${key}"]`) !== null;
    const tr = el("tr", { "data-utt": row.utt, "data-groups": row.groups.join(" "), class: row.groups.length ? "problem" : null },
      el("td", { class: "utt", title: row.source }, row.utt),
      el("td", { class: "text" }, row.text || "", row.error ? el("div", { class: "error" }, row.error) : null,
        row.hyp !== null && row.hyp !== undefined ? el("div", { class: "hyp" }, "ASR: " + row.hyp) : null),
      el("td", { class: "status-" + row.status }, row.status),
      el("td", {}, row.reasons.join(", ")),
      el("td", { class: "num" }, fmt(row.duration_s, 2)),
      el("td", { class: "num" }, fmt(row.rtf, 3)),
      el("td", { class: "num" }, fmt(row.ttfp_s, 3)),
      el("td", {}, row.finish_reason || ""));
    if (has("wer")) tr.append(el("td", { class: "num wer" }, row.wer === null ? "" : (row.wer * 100).toFixed(1)));
    if (has("sim")) tr.append(el("td", { class: "num" }, fmt(row.sim, 3)));
    if (has("mos")) tr.append(el("td", { class: "num" }, fmt(row.mos, 2)));
    tr.append(el("td", { class: "audio" }, audioBox(row.audio, "generated"), audioBox(row.ref_audio, "reference")));
    if (has("wer")) tr.append(diffCell(row.diff));
    return tr;
  }

  function render() {
    if (!table) return;
    const shown = rows.filter(matches);
    if (state.sort) shown.sort(compare);
    const size = state.size || shown.length || 1;
    const pages = Math.max(1, Math.ceil(shown.length / size));
    state.page = Math.min(state.page, pages - 1);
    const body = table.tBodies[0];
    body.replaceChildren(...shown.slice(state.page * size, (state.page + 1) * size).map(rowNode));
    document.getElementById("shown").textContent = `${shown.length} of ${rows.length} rows`;
    document.getElementById("page-info").textContent = `page ${state.page + 1} of ${pages}`;
    document.getElementById("prev").disabled = state.page === 0;
    document.getElementById("next").disabled = state.page >= pages - 1;
    table.querySelectorAll("th[data-key]").forEach((th) => {
      th.classList.toggle("sorted", th.dataset.key === state.sort);
      th.dataset.dir = th.dataset.key === state.sort ? (state.desc ? "desc" : "asc") : "";
    });
  }

  function setGroup(group) {
    state.group = group;
    state.page = 0;
    document.querySelectorAll("#groups button").forEach((b) => b.classList.toggle("active", b.dataset.group === group));
    render();
  }

  function setupTable() {
    if (!table) return;
    const groups = document.getElementById("groups");
    groups.querySelector("button .count").textContent = rows.length;
    groups.querySelector("button").addEventListener("click", () => setGroup(""));
    for (const [name, why] of Object.entries(data.groups)) {
      const n = rows.filter((r) => r.groups.includes(name)).length;
      const button = el("button", { type: "button", "data-group": name, title: why }, name + " ", el("span", { class: "count" }, n));
      if (!n) button.disabled = true;
      button.addEventListener("click", () => setGroup(name));
      groups.append(button);
    }
    const options = (id, values) => {
      const select = document.getElementById(id);
      [...new Set(values)].sort().forEach((v) => select.append(el("option", { value: v }, v)));
      return select;
    };
    options("f-status", rows.map((r) => r.status)).addEventListener("change", (e) => { state.status = e.target.value; state.page = 0; render(); });
    options("f-reason", rows.flatMap((r) => r.reasons)).addEventListener("change", (e) => { state.reason = e.target.value; state.page = 0; render(); });
    const num = (id, key) => {
      const input = document.getElementById(id);
      if (input) input.addEventListener("input", (e) => { state[key] = e.target.value === "" ? null : Number(e.target.value); state.page = 0; render(); });
    };
    num("f-wer-min", "werMin");
    num("f-wer-max", "werMax");
    document.getElementById("f-text").addEventListener("input", (e) => { state.text = e.target.value.trim().toLowerCase(); state.page = 0; render(); });
    document.getElementById("f-page-size").addEventListener("change", (e) => { state.size = Number(e.target.value); state.page = 0; render(); });
    document.getElementById("prev").addEventListener("click", () => { state.page -= 1; render(); });
    document.getElementById("next").addEventListener("click", () => { state.page += 1; render(); });
    table.querySelectorAll("th[data-key]").forEach((th) => th.addEventListener("click", () => {
      state.desc = state.sort === th.dataset.key ? !state.desc : false;
      state.sort = th.dataset.key;
      state.page = 0;
      render();
    }));
    render();
  }

  function showUtt(utt) {
    const input = document.getElementById("f-text");
    input.value = utt;
    state.text = utt.toLowerCase();
    setGroup("");
    table.scrollIntoView({ behavior: "smooth" });
  }

  // ---- figures ----
  function setupFigures() {
    for (const [name, figure] of Object.entries(data.figures)) draw("fig-" + name, figure);
    for (const id of ["fig-wer_hist", "fig-duration_hist", "fig-duration_vs_text", "fig-sweep"]) {
      if (!data.figures[id.slice(4)]) draw(id, null);
    }
    const scatter = document.getElementById("fig-duration_vs_text");
    if (scatter && scatter.on) scatter.on("plotly_click", (ev) => { if (ev.points.length) showUtt(ev.points[0].customdata); });
    const select = document.getElementById("timeline-run");
    if (select && data.timelines.length) {
      document.getElementById("timeline-none").remove();
      data.timelines.forEach((t, i) => select.append(el("option", { value: i }, t.label)));
      const show = () => Plotly.react("timeline", data.timelines[select.value].figure.data, data.timelines[select.value].figure.layout, plotConfig);
      select.addEventListener("change", show);
      show();
    } else if (select) {
      select.disabled = true;
    }
  }

  setupTable();
  setupFigures();
  window.omniReport = { rows, state, render, setGroup, readyAt: performance.now() };
})();
