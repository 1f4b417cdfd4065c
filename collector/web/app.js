// iotrace dashboard: one Server-Sent Events stream (/api/v1/events) keeps the
// cluster view and the chosen job's charts current; the job's statistics and
// timeline come from the JSON API (docs/http-api.md, docs/dashboard.md).
// What is fetched is what changed: the stream's series and the timeline come
// after a cursor, the statistics at most every STATS_EVERY_MS, so that a busy
// page keeps up with its stream instead of falling behind it.
"use strict";

const $ = (id) => document.getElementById(id);
let selected = new URLSearchParams(location.search).get("job");
let source = null;
let lastStatus = null;
let charts = {};
let timeline = null; // what is drawn: {from_s, to_s, paths_hidden, calls, disk_ops, pairs}, for clicks
let boxes = [];      // drawn calls: {x0, x1, y0, y1, call}
let tl = null;       // the timeline as fetched: cursor, origin and items by id
let series = null;   // the job's series as streamed: origin, servers, rows by second
let statsAt = 0, statsKey = null, tlKey = null;
const STATS_EVERY_MS = 2000;
const LAG_WARN_S = 5; // the analysis this far behind the store is said in a banner
// As many as the collector holds (docs/http-api.md, timeline).
const TL_CALLS = 4096, TL_DISK = 8192, TL_PAIRS = 8192, SERIES_ROWS = 600;

function human(n, unit = "") {
  if (n === null || n === undefined) return "–";
  const k = ["", "K", "M", "G", "T", "P"];
  let i = 0;
  while (Math.abs(n) >= 1000 && i < k.length - 1) { n /= 1000; i++; }
  return (i ? n.toFixed(1) : String(Math.round(n * 100) / 100)) + " " + k[i] + unit;
}
function bytes(n) { return human(n, "B"); }
function secs(s) { return s === null ? "–" : (Math.abs(s) < 1e-3 ? (s * 1e6).toFixed(0) + " µs" : Math.abs(s) < 1 ? (s * 1e3).toFixed(2) + " ms" : s.toFixed(3) + " s"); }
function cell(tr, v) { const td = document.createElement("td"); td.textContent = v; tr.appendChild(td); return td; }
function fill(table, rows) {
  const body = $(table).querySelector("tbody");
  body.replaceChildren(...rows);
}

// The job table: every column sorts (a click on its header, again for the
// other way), and the filter keeps the jobs whose id, name or user holds
// its text.  Hundreds of jobs run on a facility's collector at once.
const JOB_COLUMNS = [
  ["job", (j) => j.job],
  ["name", (j) => j.name === null ? "–" : j.name, (j) => j.name || ""],
  // The login name on the collector's host; the uid when it has none.
  ["user", (j) => j.user !== null && j.user !== undefined ? j.user : j.uid !== null ? "uid " + j.uid : "–",
   (j) => j.user || (j.uid === null ? "" : "uid " + j.uid)],
  ["state", (j) => j.state],
  ["start", (j) => j.first_s === null ? "–" : new Date(j.first_s * 1000).toISOString().slice(11, 19), (j) => j.first_s || 0],
  ["duration", (j) => j.first_s === null ? "–" : secs(j.last_s - j.first_s), (j) => j.first_s === null ? 0 : j.last_s - j.first_s],
  ["ranks", (j) => j.ranks],
  ["nodes", (j) => j.nodes + (j.nodes_without_clock ? " (" + j.nodes_without_clock + " unaligned)" : ""), (j) => j.nodes],
  ["MPI-IO calls", (j) => j.mpiio_calls],
  ["read", (j) => bytes(j.bytes_read), (j) => j.bytes_read],
  ["written", (j) => bytes(j.bytes_written), (j) => j.bytes_written],
  ["read/s", (j) => human(j.read_bytes_per_s, "B/s"), (j) => j.read_bytes_per_s],
  ["write/s", (j) => human(j.write_bytes_per_s, "B/s"), (j) => j.write_bytes_per_s],
  ["calls/s", (j) => human(j.mpiio_calls_per_s), (j) => j.mpiio_calls_per_s],
  ["disk ops", (j) => j.disk_ops],
  ["dropped", (j) => j.dropped_events],
];
let jobSort = { col: -1, dir: 1 }, lastJobs = [];

function renderJobs(jobs) {
  lastJobs = jobs;
  const want = ($("job-filter").value || "").trim().toLowerCase();
  let shown = want ? jobs.filter((j) => [j.job, j.name, j.user, j.uid === null ? "" : "uid " + j.uid]
    .some((v) => v !== null && v !== undefined && String(v).toLowerCase().includes(want))) : jobs.slice();
  if (jobSort.col >= 0) {
    const c = JOB_COLUMNS[jobSort.col], key = c[2] || c[1];
    shown.sort((x, y) => { const a = key(x), b = key(y); return (a < b ? -1 : a > b ? 1 : 0) * jobSort.dir; });
  }
  $("job-count").textContent = shown.length === jobs.length ? jobs.length + " jobs" : shown.length + " of " + jobs.length + " jobs";
  fill("jobs", shown.map((j) => {
    const tr = document.createElement("tr");
    tr.className = "click";
    tr.dataset.job = j.job;
    tr.onclick = () => select(j.job);
    JOB_COLUMNS.forEach(([, show]) => cell(tr, show(j)));
    if (j.nodes_without_clock) {
      const n = tr.children[7];
      n.className = "bad";
      n.title = "events forwarded by an agent without clock samples keep that node's own clock";
    }
    return tr;
  }));
}

function setupJobTable() {
  const row = $("jobs").querySelector("thead tr");
  row.replaceChildren(...JOB_COLUMNS.map(([name], i) => {
    const th = document.createElement("th");
    th.textContent = name;
    th.className = "sortable";
    th.onclick = () => {
      jobSort = { col: i, dir: jobSort.col === i ? -jobSort.dir : -1 };
      for (const h of row.children) h.removeAttribute("data-sort");
      th.dataset.sort = jobSort.dir > 0 ? "up" : "down";
      renderJobs(lastJobs);
    };
    return th;
  }));
  $("job-filter").oninput = () => renderJobs(lastJobs);
}

function connect() {
  if (source) source.close();
  source = new EventSource("api/v1/events" + (selected ? "?job=" + encodeURIComponent(selected) : ""));
  // A new stream starts from the whole series; the timeline too, in case
  // the collector restarted and its cursors with it.
  source.onopen = () => { $("conn").textContent = "live"; $("conn").className = "badge ok"; tl = null; tlKey = null; };
  source.onerror = () => { $("conn").textContent = "reconnecting…"; $("conn").className = "badge bad"; };
  source.onmessage = (e) => update(JSON.parse(e.data));
}

function update(msg) {
  const st = msg.status;
  $("clock").textContent = new Date(st.time_s * 1000).toISOString().replace("T", " ").slice(0, 19) + " UTC";
  // Whose jobs these are: the HTTP user's own, every job (admin), or every
  // job without paths (anonymous, loopback only).
  if (st.viewer) $("viewer").textContent = (st.viewer.user ? st.viewer.user + ": " : "") + st.viewer.sees;
  if (lastStatus) {
    const dt = st.time_s - lastStatus.time_s;
    if (dt > 0) {
      $("ingest-rate").textContent = human((st.events_stored - lastStatus.events_stored) / dt, " events/s");
      $("ingest-batches").textContent = human((st.batches_stored - lastStatus.batches_stored) / dt, " batches/s");
    }
  }
  lastStatus = st;
  $("stored").textContent = human(st.events_stored, " events");
  const sf = $("store-free");
  sf.textContent = st.store_full
    ? "store FULL since " + new Date(st.store_full_since_s * 1000).toLocaleTimeString() +
      ": nothing is acknowledged (" + st.deferred_batches + " batches sent back to the agents)"
    : "store " + bytes(st.store_bytes) + ", " + bytes(st.store_free_bytes) + " free";
  sf.className = st.store_full ? "sub bad" : "sub";
  $("jobs-count").textContent = st.jobs_running + " / " + st.jobs_finished;
  lagBanner(st);
  $("bad").textContent = st.rejected_batches + " · " + st.duplicate_batches + " · " + st.malformed_messages;
  fill("agents", (msg.nodes || []).map((n) => {
    const tr = document.createElement("tr");
    cell(tr, n.node);
    const h = cell(tr, n.connected ? "connected" : "silent");
    h.className = n.connected ? "ok" : "bad";
    cell(tr, new Date(n.last_seen_s * 1000).toLocaleTimeString());
    cell(tr, n.clock.offset_s === null ? "no samples" : secs(n.clock.offset_s) + " ± " + secs(n.clock.error_s));
    cell(tr, n.clock.drift_ppm === null ? "–" : n.clock.drift_ppm.toFixed(1) + " ppm");
    cell(tr, n.batches);
    cell(tr, n.events);
    // What the agent last reported of itself (with its clock samples).
    cell(tr, n.agent ? n.agent.pending_batches + " (" + bytes(n.agent.pending_bytes) + ")" : "–");
    cell(tr, n.agent ? n.agent.resent_batches : "–");
    cell(tr, n.agent ? n.agent.invalid_messages + n.agent.rejected_batches : "–");
    return tr;
  }));
  renderJobs(msg.jobs);
  // The busiest servers first: what loads the storage now, and whose jobs.
  const bricks = (msg.servers || []).slice().sort((a, b) =>
    (b.read_bytes_per_s + b.write_bytes_per_s) - (a.read_bytes_per_s + a.write_bytes_per_s) || b.ops - a.ops);
  fill("bricks", bricks.map((v) => {
    const tr = document.createElement("tr");
    tr.dataset.server = v.server;
    cell(tr, v.server);
    cell(tr, human(v.read_bytes_per_s, "B/s"));
    cell(tr, human(v.write_bytes_per_s, "B/s"));
    cell(tr, human(v.ops_per_s));
    cell(tr, v.p50_ns === null ? "–" : secs(v.p50_ns / 1e9));
    cell(tr, v.p99_ns === null ? "–" : secs(v.p99_ns / 1e9));
    cell(tr, v.top_jobs.map((j) => j.job + " " + human(j.bytes_per_s, "B/s")).join(", ") || "–");
    cell(tr, v.ops);
    return tr;
  }));
  if (selected) {
    // A job the analysis does not know yet (a page opened as the job
    // starts, or an analysis behind the store) is waited for.
    const j = msg.job || null;
    $("job-state").textContent = j ? j.state : "waiting for job " + selected + "…";
    $("job-state").className = "badge " + (j ? j.state : "waiting");
    if (msg.series) drawSeries(mergeSeries(msg.series));
    // The series' cursor moves with every change of the job's views and
    // figures as the merge releases events, also after its last batch.
    if (j) refreshJob(j, msg.series ? msg.series.cursor : 0, st.time_s);
    else document.body.dataset.timelineS = st.time_s;
  }
  // When the data drawn was current (collector clock): how far the page is
  // behind its stream.
  document.body.dataset.shownS = st.time_s;
}

// The analysis behind the store (waiting for a core with --analysis-yield,
// or short of CPU): the page says so, how far, and which option it is.
function lagBanner(st) {
  const b = $("lag");
  const lag = st.analysis_lag_s || 0;
  if (!st.analysis_waiting && lag < LAG_WARN_S) {
    b.hidden = true;
    return;
  }
  const how = "The live analysis is " + lag.toFixed(0) + " s behind the store (" +
    st.analysis_behind_batches + (st.analysis_behind_batches === 1 ? " batch" : " batches") +
    " stored and not analysed yet): the figures below are that far behind. ";
  b.textContent = how + (st.analysis_yield_s > 0
    ? (st.analysis_waiting ? "It is waiting for an idle core: " : "") +
      "the collector runs with --analysis-yield " + st.analysis_yield_s +
      ", which leaves the store unread while the machine has no idle core; analysis-yield = 0 (the default) keeps the dashboard live."
    : "The collector's machine is too busy for it (--analysis-yield is 0, it does not wait; --analysis-nice gives it more CPU time).");
  b.hidden = false;
}

function select(job) {
  selected = job;
  history.replaceState(null, "", "?job=" + encodeURIComponent(job));
  $("job").hidden = false;
  $("job-name").textContent = job;
  for (const f of ["stats", "jsonl", "slog2"])
    $("dl-" + f).href = "api/v1/jobs/" + encodeURIComponent(job) + "/download/" + f;
  $("detail").hidden = true;
  // Nothing of the job shown before stays under this one's name.
  fill("functions", []);
  fill("servers", []);
  tl = series = null;
  statsKey = tlKey = null;
  connect();
}

// The statistics when the job changed, at most every STATS_EVERY_MS (a
// running job's change with every message); the timeline after its cursor,
// when the job changed.  One fetch at a time: a slow answer makes the next
// one cover more, not queue behind it.
let busy = false;
async function refreshJob(j, cursor, shownS) {
  if (busy) return;
  busy = true;
  try {
    const job = encodeURIComponent(selected);
    const key = [j.state, j.events, cursor, j.clock_settled, j.final_stats_in_memory].join("/");
    const now = Date.now();
    if (key !== statsKey && now - statsAt >= STATS_EVERY_MS) {
      statsAt = now;
      const stats = await fetch("api/v1/jobs/" + job + "/stats").then((r) => r.json());
      statsKey = key;
      drawStats(stats.jobs[0]);
    }
    if (key !== tlKey) {
      const doc = await fetch("api/v1/jobs/" + job + "/timeline" + (tl ? "?since=" + tl.cursor : ""))
        .then((r) => r.json());
      tlKey = key;
      timeline = mergeTimeline(doc);
      drawTimeline(timeline);
    }
    document.body.dataset.timelineS = shownS;
  } catch (e) {
    console.log(e);
  } finally {
    busy = false;
  }
}

// Bounded maps, oldest first: the newest n stay.
function trim(map, n) {
  for (const k of map.keys()) {
    if (map.size <= n) break;
    map.delete(k);
  }
}

// What /timeline?since= sent added to what the page holds; the window is
// the answer's (the job's last seconds).  A fresh answer (since 0) or a
// new origin (an earlier event came late) starts again.
function mergeTimeline(doc) {
  if (!tl || doc.since === 0 || doc.origin_s !== tl.origin_s)
    tl = { origin_s: doc.origin_s, calls: new Map(), disk: new Map(), pairs: new Map() };
  tl.cursor = doc.cursor;
  for (const c of doc.calls) tl.calls.set(c.id, c);
  for (const d of doc.disk_ops) tl.disk.set(d.id, d);
  for (const p of doc.pairs) tl.pairs.set(p.call + "/" + p.disk, p);
  trim(tl.calls, TL_CALLS);
  trim(tl.disk, TL_DISK);
  trim(tl.pairs, TL_PAIRS);
  const inWindow = (x) => x.end_s >= doc.from_s && x.start_s <= doc.to_s;
  for (const [id, x] of tl.calls) if (!inWindow(x)) tl.calls.delete(id);
  for (const [id, x] of tl.disk) if (!inWindow(x)) tl.disk.delete(id);
  return { from_s: doc.from_s, to_s: doc.to_s, paths_hidden: doc.paths_hidden, calls: [...tl.calls.values()],
    disk_ops: [...tl.disk.values()], pairs: [...tl.pairs.values()] };
}

// The stream's series rows: the first message of a stream has them all,
// each further one those that changed.
function mergeSeries(doc) {
  if (!series || doc.since === 0 || doc.origin_s !== series.origin_s)
    series = { origin_s: doc.origin_s, rows: new Map() };
  series.servers = doc.servers;
  for (const r of doc.seconds) series.rows.set(r.t, r);
  const rows = [...series.rows.values()].sort((a, b) => a.t - b.t).slice(-SERIES_ROWS);
  series.rows = new Map(rows.map((r) => [r.t, r]));
  return { servers: series.servers, seconds: rows };
}

function drawStats(s) {
  if (!s) return;
  $("amp").textContent = s.amplification === null ? "–" : s.amplification.toFixed(3);
  $("share").textContent = s.disk_time_share === null ? "–" : s.disk_time_share.toFixed(3);
  $("unmatched").textContent = s.unmatched_calls + " · " + s.unmatched_disk_ops;
  // Calls only the disks saw (their process died with them, say): named
  // per rank under the figure, nothing when there are none.
  const only = Object.entries(s.disk_only_calls_by_rank || {});
  $("disk-only").textContent = s.disk_only_calls
    ? s.disk_only_calls + " calls seen only by the disks" +
      (only.length ? " (" + only.map(([r, n]) => "rank " + r + ": " + n).join(", ") + ")" : "")
    : "";
  $("dropped").textContent = s.dropped_events;
  fill("functions", Object.entries(s.functions).map(([name, f]) => {
    const tr = document.createElement("tr");
    tr.dataset.function = name;
    cell(tr, name);
    for (const k of ["count", "bytes", "time_ns", "mean_ns", "p50_ns", "p99_ns"]) cell(tr, f[k]);
    cell(tr, f.disk_ops_per_call.mean === null ? "-" : f.disk_ops_per_call.mean.toFixed(2));
    cell(tr, f.disk_ops_per_call.max);
    cell(tr, f.disk_bytes);
    return tr;
  }));
  fill("servers", Object.entries(s.servers).map(([name, v]) => {
    const tr = document.createElement("tr");
    cell(tr, name);
    cell(tr, v.ops);
    cell(tr, bytes(v.bytes));
    cell(tr, secs(v.busy_ns / 1e9));
    return tr;
  }));
  const buckets = ["0", "1", "2", "3-4", "5-8", "9-16", ">16"];
  const sums = buckets.map((b) => Object.values(s.functions).reduce((a, f) => a + f.disk_ops_per_call.histogram[b], 0));
  chart("ops", "bar", buckets, [{ label: "calls", data: sums, backgroundColor: "#3b6ea5" }]);
}

const palette = ["#e67e22", "#2980b9", "#8e44ad", "#16a085", "#c0392b", "#7f8c8d", "#d35400", "#27ae60"];

function drawSeries(se) {
  const t = se.seconds.map((r) => r.t + " s");
  const sets = [
    { label: "MPI-IO read", data: se.seconds.map((r) => r.read_bytes), borderColor: "#2e8b57", borderWidth: 2 },
    { label: "MPI-IO write", data: se.seconds.map((r) => r.write_bytes), borderColor: "#c0392b", borderWidth: 2 },
  ];
  se.servers.forEach((name, i) => {
    const data = se.seconds.map((r) => r.disk_bytes[i]);
    if (data.some((x) => x > 0))
      sets.push({ label: "disk " + name, data, borderColor: palette[i % palette.length], borderDash: [4, 3], borderWidth: 1.5 });
  });
  chart("bw", "line", t, sets, "bytes/s");
  chart("lat", "line", t, [
    { label: "p50", data: se.seconds.map((r) => r.p50_ns / 1e6), borderColor: "#2980b9" },
    { label: "p99", data: se.seconds.map((r) => r.p99_ns / 1e6), borderColor: "#c0392b" },
  ], "ms");
}

function chart(id, type, labels, datasets, yTitle) {
  if (typeof Chart === "undefined") return;
  if (charts[id]) {
    charts[id].data.labels = labels;
    charts[id].data.datasets = datasets;
    charts[id].update("none");
    return;
  }
  charts[id] = new Chart($(id), {
    type, data: { labels, datasets },
    options: { animation: false, responsive: true, plugins: { legend: { position: "bottom" } },
      scales: { y: { beginAtZero: true, title: { display: !!yTitle, text: yTitle || "" } } } },
  });
}

// The timeline: a lane per rank (calls) above a lane per storage-server
// thread (disk operations), an arrow from each call to each disk operation
// it caused, as Jumpshot draws them after the run.
function drawTimeline(tl) {
  const cv = $("timeline");
  const ctx = cv.getContext("2d");
  const W = cv.width, H = cv.height, left = 150, right = 10;
  ctx.fillStyle = "#111";
  ctx.fillRect(0, 0, W, H);
  const rankKey = (c) => c.node + " rank " + c.rank;
  const diskKey = (d) => d.server + " tid " + d.tid;
  const ranks = [...new Set(tl.calls.map(rankKey))].sort();
  const threads = [...new Set(tl.disk_ops.map(diskKey))].sort();
  const lanes = ranks.length + threads.length;
  boxes = [];
  if (!lanes) {
    ctx.fillStyle = "#aaa";
    ctx.fillText("no calls in the last seconds", 20, 30);
    return;
  }
  const lh = Math.min(40, (H - 20) / lanes);
  const x = (s) => left + (s - tl.from_s) / Math.max(1e-9, tl.to_s - tl.from_s) * (W - left - right);
  const y = {};
  ctx.font = "11px sans-serif";
  [...ranks, ...threads].forEach((k, i) => {
    y[k] = 10 + i * lh;
    ctx.fillStyle = i < ranks.length ? "#ddd" : "#f0c080";
    ctx.fillText(k, 4, y[k] + lh * 0.6);
    ctx.strokeStyle = "#333";
    ctx.beginPath(); ctx.moveTo(left, y[k] + lh); ctx.lineTo(W, y[k] + lh); ctx.stroke();
  });
  const byId = {};
  for (const c of tl.calls) {
    byId[c.id] = c;
    const x0 = x(c.start_s), x1 = Math.max(x0 + 1, x(c.end_s)), y0 = y[rankKey(c)] + 2;
    ctx.fillStyle = /read/.test(c.func) ? "#2ecc71" : /write/.test(c.func) ? "#e74c3c" : "#9b59b6";
    ctx.fillRect(x0, y0, x1 - x0, lh - 4);
    boxes.push({ x0, x1, y0, y1: y0 + lh - 4, call: c });
  }
  for (const d of tl.disk_ops) {
    byId[d.id] = d;
    const x0 = x(d.start_s), x1 = Math.max(x0 + 1, x(d.end_s));
    ctx.fillStyle = /read/.test(d.func) ? "#ffa500" : /write/.test(d.func) ? "#3b7bff" : "#ffffff";
    ctx.fillRect(x0, y[diskKey(d)] + 2, x1 - x0, lh - 4);
  }
  for (const p of tl.pairs) {
    const c = byId[p.call], d = byId[p.disk];
    if (!c || !d) continue;
    ctx.strokeStyle = /read/.test(d.func) ? "#ffa500" : /write/.test(d.func) ? "#3b7bff" : "#ffffff";
    ctx.beginPath();
    ctx.moveTo(x(c.start_s), y[rankKey(c)] + lh / 2);
    ctx.lineTo(x(d.start_s), y[diskKey(d)] + lh / 2);
    ctx.stroke();
  }
}

$("timeline").addEventListener("click", (e) => {
  const cv = $("timeline"), r = cv.getBoundingClientRect();
  const px = (e.clientX - r.left) * cv.width / r.width, py = (e.clientY - r.top) * cv.height / r.height;
  const hit = boxes.find((b) => px >= b.x0 - 2 && px <= b.x1 + 2 && py >= b.y0 && py <= b.y1);
  if (!hit) return;
  showCall(hit.call);
});

function showCall(c) {
  const ids = new Set(timeline.pairs.filter((p) => p.call === c.id).map((p) => p.disk));
  const ops = timeline.disk_ops.filter((d) => ids.has(d.id));
  const lines = [
    `${c.func}  CallID=${c.callid}  rank ${c.rank} on ${c.node}`,
    `file ${c.file ?? (timeline.paths_hidden ? "(hidden)" : "unknown")}  offset ${c.offset}  bytes ${c.bytes}  ${secs(c.end_s - c.start_s)}`,
    `${ops.length} disk operation${ops.length === 1 ? "" : "s"}:`,
    ...ops.map((d) => `  ${d.func} on ${d.server} (tid ${d.tid})  offset ${d.offset}  bytes ${d.bytes}  ${secs(d.end_s - d.start_s)}`),
  ];
  $("detail").textContent = lines.join("\n");
  $("detail").dataset.callid = c.callid;
  $("detail").dataset.ops = ops.length;
  $("detail").hidden = false;
}

setupJobTable();
if (selected) select(selected); else connect();
