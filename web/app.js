// Sluice live page: polls /ui/snapshot.json on this server, keeps a few minutes of snapshots in the
// tab and draws each chart with uPlot (served by this server from its npm package). No framework, no
// build step; nothing is sent anywhere but this server.

const POLL_MS = 1500;
const HISTORY_MS = 5 * 60_000;
/** Quantiles and per-minute counts are taken over this much history, ms. */
const WINDOW_MS = 10_000;
const COLORS = ["#2f7ed8", "#e8743b", "#19a979", "#945ecf", "#ed4a7b", "#13a4b4", "#6c8893", "#bf9d2e"];

/** @type {any[]} */
const history = [];

/** Rate per second of a cumulative counter between two snapshots. */
function rate(now, then, pick) {
  const dt = (now.at - then.at) / 1000;
  if (dt <= 0) return null;
  const d = pick(now) - pick(then);
  return d >= 0 ? d / dt : null; // a restart resets counters: no point rather than a negative one
}

/** The snapshot at least `ms` older than history[i] (or the oldest), for windowed rates. */
function before(i, ms) {
  const at = history[i].at - ms;
  for (let j = i - 1; j >= 0; j--) if (history[j].at <= at) return history[j];
  return i > 0 ? history[0] : null;
}

/** Prometheus-style quantile of the bucket counts that grew between two snapshots. */
function quantile(q, now, then) {
  const prev = new Map((then?.onlineLatencyBuckets ?? []).map(([le, n]) => [le, n]));
  const b = now.onlineLatencyBuckets.map(([le, n]) => [le < 0 ? Infinity : le, n - (prev.get(le) ?? 0)]);
  const total = b.length ? b[b.length - 1][1] : 0;
  if (!(total > 0)) return null;
  const rank = q * total;
  let lower = 0;
  let below = 0;
  for (const [le, n] of b) {
    if (n >= rank) {
      if (le === Infinity) return lower; // the highest finite bound, as Prometheus does
      return lower + ((le - lower) * (rank - below)) / Math.max(1e-12, n - below);
    }
    lower = le;
    below = n;
  }
  return lower;
}

const keysOf = (pick) => [...new Set(history.flatMap((s) => Object.keys(pick(s) ?? {})))].sort();

/** One series per key of `group(snapshot)` (a topic, a partition), its values `value(entry)`. */
const byKey = (group, value) => () =>
  keysOf(group).map((k) => ({
    label: k,
    values: history.map((s) => {
      const entry = group(s)?.[k];
      return entry === undefined ? null : value(entry);
    }),
  }));

/** A chart of one per-topic gauge of the snapshot (`topics[topic][field]`). */
const topicChart = (id, title, caption, field) => ({
  id,
  title,
  caption: () => caption,
  series: byKey(
    (s) => s.topics,
    (v) => v[field],
  ),
});

/**
 * Every chart: a title, a caption, its unit, and `series()` → [{ label, values[] }] aligned with
 * `history` (null where there is no point). `hidden()` hides a chart whose metric this build lacks.
 */
const CHARTS = [
  {
    id: "results",
    title: "Results per second, by lane",
    caption: () => 'Committed results/s (sluice_records_total{outcome="result"}).',
    series: () =>
      keysOf((s) => s.results).map((lane) => ({
        label: lane,
        values: history.map((s, i) => (i > 0 ? rate(s, history[i - 1], (x) => x.results[lane] ?? 0) : null)),
      })),
  },
  {
    id: "latency",
    title: "Online latency p50 / p99 (s)",
    caption: () => {
      const last = history[history.length - 1];
      const target = last?.onlineTargetSeconds != null;
      return `End-to-end (commit − record time), online lane, over the last ${WINDOW_MS / 1000} s${target ? "; against the lanes target (sluice_online_latency_target_seconds)" : "; no latency target in this build (sluice_online_latency_target_seconds absent)"}.`;
    },
    series: () => {
      const out = [
        {
          label: "p50",
          values: history.map((s, i) => (i > 0 ? quantile(0.5, s, before(i, WINDOW_MS)) : null)),
        },
        {
          label: "p99",
          values: history.map((s, i) => (i > 0 ? quantile(0.99, s, before(i, WINDOW_MS)) : null)),
        },
      ];
      if (history.some((s) => s.onlineTargetSeconds != null))
        out.push({ label: "target", values: history.map((s) => s.onlineTargetSeconds) });
      if (history.some((s) => s.onlineEstimateSeconds != null))
        out.push({ label: "guard estimate", values: history.map((s) => s.onlineEstimateSeconds) });
      return out;
    },
  },
  topicChart(
    "queue",
    "Queue depth (records), by topic",
    "Records on the broker not yet committed by the group (sluice_consumer_lag_records, summed).",
    "lagRecords",
  ),
  topicChart(
    "lag",
    "Consumer lag (s), by topic",
    "Age of the oldest uncommitted record (sluice_consumer_lag_seconds, largest partition).",
    "lagSeconds",
  ),
  topicChart(
    "drain",
    "Time to drain (s), by topic",
    "Lag ÷ group throughput (sluice_time_to_drain_seconds); a gap means lagging with no progress.",
    "timeToDrainSeconds",
  ),
  {
    id: "freshness",
    title: "Freshness (s), by partition",
    caption: () => "Now − event time of the last committed record (sluice_freshness_seconds).",
    series: byKey(
      (s) => s.freshness,
      (v) => v,
    ),
  },
  {
    id: "failures",
    title: "Dead letters and fallbacks per minute",
    caption: () =>
      `Over the last ${WINDOW_MS / 1000} s: dead letters (sluice_records_total{outcome="dead_letter"}) and online fallbacks (sluice_fallbacks_total).`,
    series: () => {
      const dl = (s) => Object.values(s.deadLetters).reduce((a, b) => a + b, 0);
      const per = (pick) =>
        history.map((s, i) => {
          const then = i > 0 ? before(i, WINDOW_MS) : null;
          const r = then ? rate(s, then, pick) : null;
          return r === null ? null : r * 60;
        });
      return [
        { label: "dead letters", values: per(dl) },
        { label: "fallbacks", values: per((s) => s.fallbacks) },
      ];
    },
  },
  {
    id: "model",
    title: "Model CPU share, by lane",
    caption: () => {
      const last = history[history.length - 1];
      return last?.modelSecondsSource === "cpu"
        ? "Model CPU seconds per second (sluice_model_cpu_seconds_total); 1 = one core busy."
        : "Model busy time per second, from the inference-duration histogram's sum (sluice_inference_seconds_sum): this build has no model CPU counter. 1 = one worker busy.";
    },
    series: () =>
      keysOf((s) => s.modelSeconds).map((lane) => ({
        label: lane,
        values: history.map((s, i) =>
          i > 0 ? rate(s, before(i, POLL_MS * 2), (x) => x.modelSeconds[lane] ?? 0) : null,
        ),
      })),
  },
  {
    id: "allowance",
    title: "Backfill allowance (SLO guard)",
    caption: () =>
      "allowance: 1 = backfill unthrottled, 0 = paused to keep online latency on target (sluice_backfill_guard_allowance_ratio); headroom: the share of its CPU budget the machine's idle CPU leaves it (sluice_backfill_cpu_headroom_ratio).",
    hidden: () => !history.some((s) => s.backfillAllowance != null),
    series: () => [
      { label: "allowance", values: history.map((s) => s.backfillAllowance) },
      { label: "headroom", values: history.map((s) => s.backfillCpuHeadroom) },
    ],
  },
];

const plots = new Map();

function el(tag, attrs = {}, text) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}

function setupCharts() {
  const root = document.getElementById("charts");
  for (const c of CHARTS) {
    const box = el("div", { class: "chart", "data-chart": c.id, "data-points": "0" });
    box.append(el("h3", {}, c.title), el("p", { class: "caption" }), el("div", { class: "plot" }));
    root.append(box);
  }
}

function drawChart(c, xs) {
  const box = document.querySelector(`[data-chart="${c.id}"]`);
  const hidden = c.hidden ? c.hidden() : false;
  box.hidden = hidden;
  if (hidden) return;
  box.querySelector(".caption").textContent = c.caption();
  const series = c.series();
  const points = series.reduce(
    (n, s) => n + s.values.filter((v) => v !== null && Number.isFinite(v)).length,
    0,
  );
  box.setAttribute("data-points", String(points));
  const key = series.map((s) => s.label).join("\u0000");
  const data = [
    xs,
    ...series.map((s) => s.values.map((v) => (v === null || !Number.isFinite(v) ? null : v))),
  ];
  let p = plots.get(c.id);
  if (p && p.key !== key) {
    p.plot.destroy();
    p = undefined;
  }
  const plotEl = box.querySelector(".plot");
  if (!p) {
    const opts = {
      width: Math.max(200, plotEl.clientWidth),
      height: 150,
      legend: { live: false },
      cursor: { drag: { x: false, y: false } },
      scales: {
        x: { time: true },
        y: { range: (_u, min, max) => [Math.min(0, min), max > 0 ? max * 1.1 : 1] },
      },
      axes: [{}, { size: 50 }],
      series: [
        {},
        ...series.map((s, i) => ({
          label: s.label,
          stroke: COLORS[i % COLORS.length],
          width: 1.5,
          spanGaps: false,
          points: { show: false },
        })),
      ],
    };
    p = { key, plot: new uPlot(opts, data, plotEl) };
    plots.set(c.id, p);
  } else {
    p.plot.setData(data);
  }
}

function fmtSeconds(s) {
  if (s === null || s === undefined) return "–";
  if (s < 90) return `${Math.round(s)} s`;
  if (s < 5400) return `${Math.round(s / 60)} min`;
  return `${(s / 3600).toFixed(1)} h`;
}

function fillTable(id, rows, empty, columns) {
  const body = document.querySelector(`#${id} tbody`);
  body.replaceChildren();
  if (rows.length === 0) {
    const tr = el("tr");
    tr.append(el("td", { colspan: String(columns), class: "muted" }, empty));
    body.append(tr);
    return;
  }
  for (const cells of rows) {
    const tr = el("tr");
    for (const c of cells) {
      const td = el("td");
      if (c instanceof Node) td.append(c);
      else td.textContent = c;
      tr.append(td);
    }
    body.append(tr);
  }
}

function drawTables(s) {
  const runs = s.runs?.runs ?? [];
  fillTable(
    "runs",
    runs.map((r) => {
      const pct = r.rowsTotal ? Math.min(100, (100 * r.rowsDone) / r.rowsTotal) : null;
      const bar = el("span", { class: "bar" });
      const fill = el("span");
      fill.style.width = `${pct ?? 0}%`;
      bar.append(fill);
      const done = el("span", { "data-run": r.runId, "data-rows-done": String(r.rowsDone) });
      done.append(bar, document.createTextNode(`${r.rowsDone} / ${r.rowsTotal ?? "?"}`));
      return [
        r.runId,
        r.state,
        done,
        pct === null ? "–" : `${pct.toFixed(1)} %`,
        r.rowsPerSec === null ? "–" : r.rowsPerSec.toFixed(1),
        r.state === "done" ? "done" : fmtSeconds(r.etaSeconds),
        String(r.rowsInvalid),
      ];
    }),
    s.runs ? "no backfill runs in topics.runs" : "no backfill topic configured (topics.backfill)",
    7,
  );
  const err = document.getElementById("runs-error");
  err.hidden = !s.runs?.error;
  err.textContent = s.runs?.error ? `runs not read: ${s.runs.error}` : "";
  const m = s.models;
  const ms = (v) => (v === null || v === undefined ? "–" : `${v.toFixed(2)} ms`);
  const sh = m?.shadow;
  const agreement = Object.entries(sh?.agreement ?? {}).map(([measure, a]) => [
    `agreement (${measure})`,
    "",
    `${a.mean.toFixed(measure === "max_abs_diff" ? 4 : 3)} over ${a.count}`,
  ]);
  fillTable(
    "models",
    m
      ? [
          ["version", m.online ?? "–", m.candidate ?? "none"],
          ["latency per item", ms(sh.latencyMsPerItem.online), ms(sh.latencyMsPerItem.candidate)],
          ["model CPU per item", ms(sh.cpuMsPerItem.online), ms(sh.cpuMsPerItem.candidate)],
          [
            "shadowed",
            "",
            `${sh.requests.scored ?? 0} scored, ${sh.requests.shed ?? 0} shed, ${sh.requests.revoked ?? 0} revoked`,
          ],
          ...agreement,
        ]
      : [],
    "no model info",
    3,
  );
  fillTable(
    "assignment",
    s.assignment.map((a) => [a.topic, String(a.partition), a.lane, a.phase]),
    "none assigned",
    4,
  );
}

function draw() {
  const last = history[history.length - 1];
  const xs = history.map((s) => s.at / 1000);
  for (const c of CHARTS) drawChart(c, xs);
  drawTables(last);
  document.getElementById("status").textContent =
    `instance ${last.instanceId} · ${new Date(last.at).toLocaleTimeString()} · ${history.length} samples`;
}

async function poll() {
  try {
    const res = await fetch("/ui/snapshot.json", { cache: "no-store" });
    if (!res.ok) throw new Error(`HTTP ${res.status}`);
    const s = await res.json();
    history.push(s);
    while (history.length > 2 && s.at - history[0].at > HISTORY_MS) history.shift();
    draw();
  } catch (error) {
    document.getElementById("status").textContent = `not reachable (${error.message}); retrying…`;
  } finally {
    setTimeout(poll, POLL_MS);
  }
}

window.addEventListener("resize", () => {
  for (const { plot } of plots.values()) {
    const w = plot.root.parentElement.clientWidth;
    plot.setSize({ width: Math.max(200, w), height: 150 });
  }
});

setupCharts();
void poll();
