// tilefarm dashboard: reads the /v1 API (the dashboard session is an HttpOnly cookie the page never sees) and draws
// the pages. No framework, no build step; one file: helpers, a tiny syntax highlighter, a line diff, then one
// function per page.
//
// Everything a job produced is hostile (its answers came out of a sandbox running the user's code), so data only
// ever reaches the page as text: elements are built with h()/svg() below, strings become text nodes and attributes
// are set one by one. Nothing here assigns markup (no innerHTML, outerHTML, insertAdjacentHTML or document.write);
// tests/web/test_hostile_answers.py checks it in Chromium with script payloads in every field, and the server's
// Content-Security-Policy (script-src 'self') would refuse an injected script anyway.
"use strict";

// ---------- helpers ----------
const $ = (sel, root = document) => root.querySelector(sel);
// statuses, stages and log levels as the schemas define them (served by base.html), never written out here
const SCHEMA = JSON.parse(document.getElementById("tilefarm-schema").textContent);
const TERMINAL = new Set(SCHEMA.terminal);
// API times are RFC 3339 strings; the page computes in epoch seconds
const epoch = (time) => (time == null ? null : Date.parse(time) / 1000);

// ---------- building the page: data is text, never markup ----------
const SVG_NS = "http://www.w3.org/2000/svg";
const URL_ATTRIBUTES = new Set(["href", "src", "action", "formaction", "xlink:href"]);
// links the page makes are to this server (a path, a query, a fragment) or to a blob it made: never javascript:,
// data: or another host, whatever a job id or name says
const ownUrl = (url) => /^(\/(?![/\\])|\?|#|blob:)/.test(url);

function build(namespace, tag, attributes, children) {
  const node = namespace ? document.createElementNS(namespace, tag) : document.createElement(tag);
  for (const [name, value] of Object.entries(attributes || {})) {
    if (value == null || value === false) continue;
    if (name === "style") Object.assign(node.style, value);          // CSSOM: no style attribute to parse
    else if (typeof value === "function") node.addEventListener(name.replace(/^on/, ""), value);
    else if (URL_ATTRIBUTES.has(name) && !ownUrl(String(value))) console.warn(`not linking to ${String(value).slice(0, 80)}`);
    else node.setAttribute(name, value === true ? "" : String(value));
  }
  return add(node, ...children);
}
// append children: strings and numbers as text nodes, nodes as they are, arrays flattened, null/false skipped
function add(node, ...children) {
  for (const child of children.flat(Infinity)) {
    if (child == null || child === false) continue;
    node.append(child instanceof Node ? child : String(child));
  }
  return node;
}
const h = (tag, attributes, ...children) => build(null, tag, attributes, children);
const svg = (tag, attributes, ...children) => build(SVG_NS, tag, attributes, children);
// replace what a container shows
const show = (container, ...children) => { container.replaceChildren(); return add(container, ...children); };
const joined = (items, separator) => items.flatMap((item, i) => (i ? [separator, item] : [item]));

class ApiError extends Error {
  constructor(status, problem) {
    super(problem.detail || problem.title || `HTTP ${status}`);
    this.status = status;
    this.problem = problem;
  }
}

// fetch an API path (the session cookie goes with it); returns the Response (ok) or throws ApiError (problem+json)
async function api(path, options = {}) {
  const headers = Object.assign({}, options.headers || {});
  if (options.json !== undefined) {
    headers["Content-Type"] = "application/json";
    options.body = JSON.stringify(options.json);
  }
  const response = await fetch(path, { method: options.method || "GET", headers, body: options.body, signal: options.signal,
                                       credentials: "same-origin" });
  if (response.status === 401) $("#auth-banner").hidden = false;
  else if (response.ok) $("#auth-banner").hidden = true;
  if (!response.ok) {
    let problem = {};
    try { problem = await response.json(); } catch (_) { /* not JSON */ }
    const errors = problem.errors || (Array.isArray(problem.detail) ? problem.detail : []);
    if (errors.length) problem.detail = `${Array.isArray(problem.detail) ? "invalid request" : problem.detail}: ` +
      errors.map((d) => `${(d.loc || []).filter((p) => p !== "body").join(".")}: ${d.msg}`).join("; ");
    throw new ApiError(response.status, problem);
  }
  return response;
}
const apiJson = async (path, options) => (await api(path, options)).json();
const jobPath = (id) => `/jobs/${encodeURIComponent(id)}`;

function duration(seconds) {
  if (seconds == null || isNaN(seconds)) return "–";
  if (seconds < 1) return `${Math.round(seconds * 1000)} ms`;
  if (seconds < 60) return `${seconds.toFixed(1)} s`;
  const m = Math.floor(seconds / 60), s = Math.round(seconds % 60);
  return m < 60 ? `${m}m ${s}s` : `${Math.floor(m / 60)}h ${m % 60}m`;
}
function age(time) {
  const timestamp = typeof time === "string" ? epoch(time) : time;
  const s = Date.now() / 1000 - timestamp;
  if (s < 5) return "just now";
  if (s < 60) return `${Math.floor(s)}s ago`;
  if (s < 3600) return `${Math.floor(s / 60)}m ago`;
  if (s < 86400) return `${Math.floor(s / 3600)}h ago`;
  return new Date(timestamp * 1000).toLocaleDateString();
}
function jobDuration(job) {
  if (!job.started_at) return null;
  return (epoch(job.finished_at) || Date.now() / 1000) - epoch(job.started_at);
}
const localTime = (time) => new Date(time).toLocaleString();
// where a job is: queue position while it waits, the running stage against its usual duration
function phase(job) {
  const p = job.progress || {};
  if (job.status === "queued" && p.queue_position != null) return p.queue_position ? `${p.queue_position} ahead` : "next";
  if (job.status === "running" && p.stage) return `${p.stage} ${p.done + 1}/${p.total}${p.stage_typical_s ? ` · ~${duration(p.stage_typical_s)} typical` : ""}`;
  return job.stage || "";
}
const badge = (status, text) => h("span", { class: `badge ${status}` }, text || status);
const bytes = (n) => (n == null ? "–" : n >= 1048576 ? `${(n / 1048576).toFixed(1)} MiB` : n >= 1024 ? `${(n / 1024).toFixed(1)} KiB` : `${n} B`);
// a number from an answer, as text: anything else (a string, an object) shows as "?"
const num = (value) => (typeof value === "number" && isFinite(value) ? value : "?");

// run fn now and then every `interval()` ms (the interval may change as jobs start and end)
function poll(fn, interval) {
  let timer = null, stopped = false;
  const tick = async () => {
    try { await fn(); } catch (e) { console.warn(e); }
    if (!stopped) timer = setTimeout(tick, interval());
  };
  tick();
  return () => { stopped = true; clearTimeout(timer); };
}

async function saveBlob(path, fallbackName) {
  const response = await api(path);
  const disposition = response.headers.get("Content-Disposition") || "";
  const name = (disposition.match(/filename="([^"]+)"/) || [])[1] || fallbackName;
  const url = URL.createObjectURL(await response.blob());
  const link = h("a", { href: url, download: name });
  document.body.appendChild(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10000);
}

// ---------- a tiny syntax highlighter: C++, Python, JSON ----------
const WORDS = {
  cpp: new Set("auto break case class const constexpr continue default do else enum extern for if inline namespace return sizeof static struct switch template typename using void volatile while true false nullptr".split(" ")),
  cppTypes: new Set("int char bool float double long short unsigned signed size_t uint8_t uint16_t uint32_t uint64_t int32_t int64_t".split(" ")),
  py: new Set("and as assert async await break class continue def del elif else except finally for from global if import in is lambda nonlocal not or pass raise return try while with yield".split(" ")),
  pyLit: new Set(["True", "False", "None"]),
};
const RULES = {
  cpp: [
    ["com", /\/\/[^\n]*|\/\*[\s\S]*?(?:\*\/|$)/y],
    ["str", /"(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*'/y],
    ["pp", /#[ \t]*(?:include|define|undef|pragma|if|ifdef|ifndef|elif|else|endif)\b[^\n]*/y],
    ["num", /\b(?:0[xX][0-9a-fA-F]+|\d+\.?\d*(?:[eE][+-]?\d+)?)[uUlLfF]*\b/y],
  ],
  py: [
    ["com", /#[^\n]*/y],
    ["str", /[rRbBfF]{0,2}(?:"""[\s\S]*?(?:"""|$)|'''[\s\S]*?(?:'''|$)|"(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*')/y],
    ["pp", /@[\w.]+/y],
    ["num", /\b\d+\.?\d*(?:[eE][+-]?\d+)?\b/y],
  ],
  json: [
    ["str", /"(?:\\.|[^"\\])*"/y],
    ["num", /-?\b\d+\.?\d*(?:[eE][+-]?\d+)?\b/y],
    ["lit", /\b(?:true|false|null)\b/y],
  ],
};
const IDENT = /[A-Za-z_]\w*/y;

function tokenize(text, lang) {
  const rules = RULES[lang] || [];
  const tokens = [];
  let pos = 0, plain = "";
  const flush = () => { if (plain) { tokens.push(["", plain]); plain = ""; } };
  while (pos < text.length) {
    let matched = false;
    for (const [cls, re] of rules) {
      re.lastIndex = pos;
      const m = re.exec(text);
      if (m && m[0].length) {
        let kind = cls;
        if (lang === "json" && cls === "str" && /^\s*:/.test(text.slice(pos + m[0].length, pos + m[0].length + 8))) kind = "key";
        flush(); tokens.push([kind, m[0]]); pos += m[0].length; matched = true; break;
      }
    }
    if (matched) continue;
    IDENT.lastIndex = pos;
    const id = lang !== "json" && IDENT.exec(text);
    if (id) {
      const word = id[0];
      let kind = "";
      if (lang === "cpp") kind = WORDS.cpp.has(word) ? "kw" : WORDS.cppTypes.has(word) || /_t$/.test(word) ? "type" : "";
      if (lang === "py") kind = WORDS.py.has(word) ? "kw" : WORDS.pyLit.has(word) ? "lit" : "";
      if (!kind && /^\s*\(/.test(text.slice(pos + word.length, pos + word.length + 4))) kind = "fn";
      if (kind) { flush(); tokens.push([kind, word]); } else plain += word;
      pos += word.length;
      continue;
    }
    plain += text[pos++];
  }
  flush();
  return tokens;
}

// -> the nodes of each line (a token spanning lines is closed and reopened at each line break)
function highlightLines(text, lang) {
  const lines = [[]];
  for (const [cls, value] of tokenize(text, lang)) {
    value.split("\n").forEach((part, i) => {
      if (i > 0) lines.push([]);
      if (part) lines[lines.length - 1].push(cls ? h("span", { class: `tok-${cls}` }, part) : part);
    });
  }
  if (lines.length > 1 && !lines[lines.length - 1].length) lines.pop();
  return lines;
}
const highlightLine = (text, lang) => highlightLines(text, lang)[0];
const codeOf = (nodes) => h("code", null, nodes && nodes.length ? nodes : " ");
const langOf = (name) => (/\.(cpp|cc|h|hpp)$/.test(name) ? "cpp" : /\.py$/.test(name) ? "py" : /\.json$/.test(name) ? "json" : "");

// lines with numbers; `marks` maps a line number to the diagnostics shown under it
function renderCode(container, text, lang, marks = new Map()) {
  const rows = highlightLines(text, lang).flatMap((line, i) => {
    const n = i + 1, diags = marks.get(n) || [];
    // #L14 links to the source's line 14
    const row = h("div", { class: `ln${diags.length ? " diag" : ""}`, id: container.id === "source" ? `L${n}` : null, "data-line": n },
      h("i", null, n), codeOf(line));
    return [row, ...diags.map((d) => {
      const indent = " ".repeat(Math.max(0, (d.col || 1) - 1));
      return h("div", { class: "diag-msg", "data-diag-line": n },
        h("span", { class: "caret" }, d.col ? `${indent}^ ` : ""), `error: ${d.message}`, d.hint ? `\n${indent}  hint: ${d.hint}` : null);
    })];
  });
  show(container, rows);
}

// ---------- diffs: per-pass IR changes (computed here), and unified diffs from the API ----------
// the line diff of two texts (longest common subsequence; IR dumps and kernels are at most a few thousand lines)
function lineDiff(before, after) {
  const a = before.split("\n"), b = after.split("\n");
  const n = a.length, m = b.length;
  const common = Array.from({ length: n + 1 }, () => new Uint32Array(m + 1));
  for (let i = n - 1; i >= 0; i--) for (let j = m - 1; j >= 0; j--)
    common[i][j] = a[i] === b[j] ? common[i + 1][j + 1] + 1 : Math.max(common[i + 1][j], common[i][j + 1]);
  const ops = [];
  let i = 0, j = 0;
  while (i < n || j < m) {
    if (i < n && j < m && a[i] === b[j]) { ops.push([" ", a[i]]); i++; j++; }
    else if (j < m && (i === n || common[i][j + 1] >= common[i + 1][j])) ops.push(["+", b[j++]]);
    else ops.push(["-", a[i++]]);
  }
  return ops;
}

const foldRow = (folded) => h("div", { class: "ln fold" }, h("i"), h("code", null, `… ${folded} unchanged line${folded > 1 ? "s" : ""}`));

// diff lines ([op, text]) as code; unchanged runs longer than 2 * context lines are folded
function renderDiff(container, ops, lang, context = 3) {
  const changed = ops.map((o) => o[0] !== " ");
  const near = (k) => changed.slice(Math.max(0, k - context), k + context + 1).some(Boolean);
  const rows = [];
  let folded = 0, added = 0, removed = 0;
  ops.forEach(([op, text], k) => {
    if (op === "+") added++;
    if (op === "-") removed++;
    if (op === " " && !near(k)) { folded++; return; }
    if (folded) { rows.push(foldRow(folded)); folded = 0; }
    const cls = op === "+" ? "add" : op === "-" ? "del" : "";
    rows.push(h("div", { class: `ln ${cls}` }, h("i", null, op.trim()), codeOf(highlightLine(text, lang))));
  });
  if (folded) rows.push(foldRow(folded));
  show(container, rows.length ? rows : h("p", { class: "muted pad" }, "no change"));
  return { added, removed };
}

// a unified diff (text) as coloured lines, at most MAX_DIFF_LINES of them: a diff of two wholly different artifacts
// (two blockings' profile.json: ~114k lines) drawn whole made the compare page a DOM of 116k rows that took a
// loaded browser longer than 30 s to paint; the rest is one line saying how much was left out
const MAX_DIFF_LINES = 2000;
function renderUnified(container, patch, lang) {
  const lines = patch.replace(/\n$/, "").split("\n"), left = lines.length - MAX_DIFF_LINES;
  const rows = lines.slice(0, MAX_DIFF_LINES).map((line) => {
    const cls = line.startsWith("+++") || line.startsWith("---") ? "head" : line.startsWith("@@") ? "hunk" : line[0] === "+" ? "add" : line[0] === "-" ? "del" : "";
    const body = cls === "head" || cls === "hunk" ? h("code", null, line) : codeOf(highlightLine(line.slice(1), lang));
    return h("div", { class: `ln ${cls}` }, h("i", null, cls === "add" || cls === "del" ? line[0] : ""), body);
  });
  if (left > 0) rows.push(h("div", { class: "ln fold", "data-left-out": left }, h("i"),
    h("code", null, `… ${left} more line${left > 1 ? "s" : ""} of this diff not shown (download both bundles to compare)`)));
  show(container, rows);
}

// ---------- the dashboard session (every page): the token goes to the server once, which keeps it in an HttpOnly,
// SameSite=Strict cookie: no page script can read it back
async function initToken() {
  const state = $("#token-state");
  // not through api(): whether the session exists must not show or hide the page's "token needed" banner
  const session = (method, body) => fetch("/ui/session", {
    method, credentials: "same-origin", headers: body ? { "Content-Type": "application/json" } : {}, body: body && JSON.stringify(body) });
  $("#token-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    const value = $("#token-input").value.trim();
    $("#token-input").value = "";
    if (!value) return;
    const response = await session("POST", { token: value });
    if (response.ok) location.reload();
    else state.textContent = `token refused (${response.status})`;
  });
  $("#token-clear").addEventListener("click", async () => {
    await session("DELETE").catch((e) => console.warn("session", e));
    location.reload();
  });
  try {
    const current = await (await session("GET")).json();
    state.textContent = current.signed_in ? `token set · ${current.team}${current.admin ? " (admin)" : ""}` : "";
  } catch (e) { console.warn("session", e); }
}

// ---------- jobs list ----------
function initJobs() {
  const form = $("#filters"), body = $("#jobs-body");
  const params = new URLSearchParams(location.search);
  for (const el of form.elements) if (params.has(el.name)) el.value = params.get(el.name);
  let limit = 50, active = false;

  const stageDots = (j) => h("span", { class: "stage-dots" }, j.stages.map((s) =>
    h("span", { class: s.state, title: `${s.name}: ${s.state}${s.duration_s != null ? " in " + duration(s.duration_s) : ""}` })));
  const notes = (j) => [j.cache_hit ? badge("hit", "cache hit") : null,
    j.warnings.length ? [" ", h("span", { class: "badge warn", title: j.warnings.map((w) => w.message).join("\n") },
      `${j.warnings.length} warning${j.warnings.length > 1 ? "s" : ""}`)] : null];
  const render = (items) => {
    const team = form.elements.team.value.trim().toLowerCase(), q = form.elements.q.value.trim().toLowerCase();
    const shown = items.filter((j) => (!team || (j.team || "").toLowerCase().includes(team)) &&
      (!q || j.id.includes(q) || (j.filename || "").toLowerCase().includes(q)));
    if (!shown.length) {
      show(body, h("tr", null, h("td", { colspan: 9, class: "muted" },
        items.length ? "no jobs match" : ["no jobs yet: ", h("a", { href: "/submit" }, "submit one")])));
      return;
    }
    show(body, shown.map((j) => h("tr", { "data-job-id": j.id, "data-status": j.status },
      h("td", null, badge(j.status)),
      h("td", { class: "mono" }, h("a", { href: jobPath(j.id) }, j.id)),
      h("td", { class: "mono" }, j.filename, j.entry ? `:${j.entry}` : null),
      h("td", null, j.target.arch),
      h("td", null, j.team),
      h("td", null, stageDots(j), " ", h("span", { class: "phase" }, phase(j))),
      h("td", { title: localTime(j.created_at) }, age(j.created_at)),
      h("td", { class: "num" }, duration(jobDuration(j))),
      h("td", null, notes(j)))));
  };

  const refresh = async () => {
    const query = new URLSearchParams({ limit });
    for (const name of ["status", "target"]) if (form.elements[name].value) query.set(name, form.elements[name].value);
    const page = await apiJson(`/v1/jobs?${query}`);
    active = page.items.some((j) => !TERMINAL.has(j.status));
    $("#more").hidden = !page.next_cursor || limit >= 200;
    render(page.items);
  };
  poll(refresh, () => (document.hidden ? 10000 : active ? 1000 : 3000));
  form.addEventListener("input", () => {
    const query = new URLSearchParams();
    for (const el of form.elements) if (el.name && el.value) query.set(el.name, el.value);
    history.replaceState(null, "", query.toString() ? `?${query}` : location.pathname);
    refresh();
  });
  form.addEventListener("submit", (e) => e.preventDefault());
  $("#more").addEventListener("click", () => { limit = Math.min(200, limit + 50); refresh(); });
  body.addEventListener("click", (event) => {
    const row = event.target.closest("tr[data-job-id]");
    if (row && !event.target.closest("a")) location.href = jobPath(row.dataset.jobId);
  });
}

// ---------- one job ----------
function initJob() {
  const jobId = $("#job").dataset.jobId;
  const jobApi = `/v1/jobs/${encodeURIComponent(jobId)}`;
  let job = null, manifestKey = null, sourceShown = false, logStarted = false, stop = null, currentArtifact = null;
  let lineMap = null;  // linemap.json: C++ line <-> source line, per kernel file
  const artifactCache = new Map();

  const renderHeader = () => {
    const status = $("#job-status");
    status.className = `badge ${job.status}`;
    status.dataset.status = job.status;
    status.textContent = job.status;
    document.title = `${job.status} · ${job.filename} · tilefarm`;
    $("#job-live").classList.toggle("off", TERMINAL.has(job.status));
    $("#cancel").hidden = TERMINAL.has(job.status);
    $("#download").disabled = !TERMINAL.has(job.status);
    $("#compare").hidden = !job.resubmitted_from;
    if (job.resubmitted_from) $("#compare").href = `/diff?${new URLSearchParams({ a: job.resubmitted_from, b: job.id })}`;
    $("#edit").href = `/submit?${new URLSearchParams({ from: job.id })}`;
    const worker = job.worker ? `${job.worker.hostname} pid ${job.worker.pid}` : "–";
    const t = job.target;
    const params = Object.entries(job.params || {}).map(([k, v]) => `${k}=${v}`).join(" ");
    const inputs = Object.entries(job.inputs || {}).map(([k, v]) => `${k} ${(v.shape || []).join("×")} ${v.dtype}`).join(", ");
    const facts = [
      ["file", [h("span", { class: "mono" }, job.filename), job.entry ? [" entry ", h("span", { class: "mono" }, job.entry)] : null]],
      ...(params ? [["params", h("span", { class: "mono", id: "fact-params" }, params)]] : []),
      ["target", `${t.arch}${t.core_grid ? ` ${t.core_grid.join("×")}` : ""} · ${t.partition ?? "auto partition"} · cb depth ${t.cb_depth ?? "auto"} · ${t.math_fidelity ?? "auto fidelity"}`],
      ["inputs", inputs || "random (seeded)"],
      ["team", job.team],
      ["submitted", h("span", { title: localTime(job.created_at) }, age(job.created_at))],
      ["duration", duration(jobDuration(job))],
      ["cache", job.cache_hit ? badge("hit", "cache hit") : "miss"],
      ["compiler", job.compiler_version || "–"],
      ["worker", worker],
      ["attempts", job.attempts],
      ...(job.resubmitted_from ? [["from", h("a", { class: "mono", href: jobPath(job.resubmitted_from) }, job.resubmitted_from)]] : []),
    ];
    show($("#facts"), facts.map(([k, v]) => h("div", null, h("dt", null, k), h("dd", null, v))));
    renderVerdict($("#verdict"), job);
    const error = $("#job-error");
    error.hidden = !job.error || job.diagnostics.length > 0;
    error.textContent = job.error || "";
    const warnings = $("#job-warnings");
    warnings.hidden = !job.warnings.length;
    const grouped = new Map();
    for (const w of job.warnings) grouped.set(`${w.stage}: ${w.message}`, (grouped.get(`${w.stage}: ${w.message}`) || 0) + 1);
    show(warnings, h("strong", null, `${job.warnings.length} warning${job.warnings.length > 1 ? "s" : ""}`),
      h("ul", null, [...grouped].map(([text, n]) => h("li", null, text, n > 1 ? [" ", h("span", { class: "muted" }, `×${n}`)] : null))));
  };

  const renderTimeline = () => {
    const now = Date.now() / 1000, t0 = epoch(job.created_at);
    const end = epoch(job.finished_at) || now;
    const span = Math.max(end - t0, 0.001);
    const p = job.progress || {};
    const waiting = job.status === "queued" && p.queue_position != null ? (p.queue_position ? `${p.queue_position} ahead` : "next") : null;
    const rows = [{ name: "queued", state: job.started_at ? "succeeded" : job.status === "queued" ? "running" : "skipped", started_at: job.created_at, finished_at: job.started_at || (job.status === "queued" ? null : job.finished_at), note: waiting }];
    rows.push(...job.stages.map((s) => ({ ...s, note: s.state === "running" && p.stage_typical_s ? `~${duration(p.stage_typical_s)} typical` : null })));
    $("#progress").textContent = TERMINAL.has(job.status) ? "" : `${p.done} of ${p.total} stages done` + (waiting ? ` · queue: ${waiting}` : p.stage ? ` · ${p.stage} running ${duration(p.stage_elapsed_s)}` : "");
    show($("#timeline"), rows.map((s) => {
      const start = epoch(s.started_at), stop = epoch(s.finished_at) || (s.state === "running" ? now : null);
      const bar = start && stop != null
        ? h("div", { class: `tl-bar ${s.state}`, style: { left: `${((start - t0) / span) * 100}%`, width: `${Math.max(((stop - start) / span) * 100, 0.4)}%` } }) : null;
      const dur = s.duration_s != null ? s.duration_s : start && stop ? stop - start : null;
      return h("div", { class: "tl-row", "data-stage": s.name, "data-state": s.state },
        h("span", null, s.name, " ", s.name === "queued" ? null : badge(s.state)),
        h("div", { class: "tl-track", title: s.detail || "" }, bar),
        h("span", { class: "dur" }, s.state === "pending" || s.state === "skipped" ? s.state : duration(dur),
          s.note ? h("small", { class: "muted" }, ` ${s.note}`) : null));
    }));
  };

  const renderSource = async () => {
    const text = await (await api(`${jobApi}/source`)).text();
    const marks = new Map();
    for (const d of job.diagnostics) if (d.line) marks.set(d.line, [...(marks.get(d.line) || []), d]);
    $("#source-name").textContent = job.filename;
    renderCode($("#source"), text, "py", marks);
    // each error once in the list; its hint under the source line it is at (or here, when it is at no line)
    show($("#diagnostics"), job.diagnostics.length ? h("ul", { class: "diag-list" }, job.diagnostics.map((d) => {
      const text = `${[d.file || job.filename, d.line, d.col].filter((x) => x != null).join(":")}: error: ${d.message}`;
      // what kind of refusal it is: something Tenstorrent cannot express, or something not lowered yet
      const refusal = d.refusal ? `${d.refusal.expressible ? "expressible, not yet lowered" : "not expressible on Tenstorrent"}: ${d.refusal.reason}` : null;
      return h("li", null, Number.isInteger(d.line) ? h("a", { href: `#L${d.line}` }, text) : text,
        d.hint && !Number.isInteger(d.line) ? [h("br"), `hint: ${d.hint}`] : null,
        refusal ? [h("br"), h("span", { class: "refusal" }, refusal)] : null);
    })) : null);
    const first = $("#source .ln.diag");
    if (first) $("#source").scrollTop = Math.max(0, first.offsetTop - 120);
    sourceShown = true;
    markMapped();
  };

  const artifactPath = (name) => `${jobApi}/artifacts/${name.split("/").map(encodeURIComponent).join("/")}`;
  const artifactText = async (name) => {
    if (!artifactCache.has(name)) artifactCache.set(name, api(artifactPath(name)).then((r) => r.text()));
    return artifactCache.get(name);
  };

  // ---- source <-> C++ lines (linemap.json): hovering a line lights up its counterpart on the other side
  const mappedLines = (file) => (lineMap && lineMap.files && Object.hasOwn(lineMap.files, file) && lineMap.files[file]) || null;
  const lineNumbers = (values) => (Array.isArray(values) ? values : []).map(Number).filter(Number.isInteger);
  const markMapped = () => {
    const map = mappedLines(currentArtifact);
    const sourceLines = new Set(map ? Object.values(map).flatMap(lineNumbers) : []);
    for (const row of document.querySelectorAll("#source .ln")) row.classList.toggle("has-map", sourceLines.has(Number(row.dataset.line)));
    for (const row of document.querySelectorAll("#artifact-view .ln[data-line]")) row.classList.toggle("has-map", !!(map && Object.hasOwn(map, row.dataset.line)));
  };
  const lineRow = (where, n) => $(`${where} .ln[data-line="${Number(n)}"]`);
  const highlight = (sourceLines, cppLines) => {
    for (const el of document.querySelectorAll(".ln.mapped")) el.classList.remove("mapped");
    for (const n of sourceLines) lineRow("#source", n)?.classList.add("mapped");
    for (const n of cppLines) lineRow("#artifact-view", n)?.classList.add("mapped");
  };
  const onSourceHover = (event) => {
    const row = event.target.closest(".ln[data-line]"), map = mappedLines(currentArtifact);
    if (!row || !map) return;
    const line = Number(row.dataset.line);
    const cpp = Object.entries(map).filter(([, src]) => lineNumbers(src).includes(line)).map(([n]) => Number(n)).filter(Number.isInteger);
    highlight(cpp.length ? [line] : [], cpp);
    const first = cpp.length && lineRow("#artifact-view", Math.min(...cpp));
    if (first) { const view = $("#artifact-view"); if (first.offsetTop < view.scrollTop || first.offsetTop > view.scrollTop + view.clientHeight - 20) view.scrollTop = Math.max(0, first.offsetTop - 60); }
  };
  const onCppHover = (event) => {
    const row = event.target.closest(".ln[data-line]"), map = mappedLines(currentArtifact);
    if (!row || !map) return;
    const src = Object.hasOwn(map, row.dataset.line) ? lineNumbers(map[row.dataset.line]) : [];
    highlight(src, src.length ? [Number(row.dataset.line)] : []);
  };
  $("#source").addEventListener("mouseover", onSourceHover);
  $("#artifact-view").addEventListener("mouseover", onCppHover);

  // ---- artifacts: kernels, plan, IR after each pass (with what the pass changed)
  const irNames = () => [...document.querySelectorAll("#ir-pass option")].map((o) => o.value);
  const showIr = async (name, changes) => {
    const view = $("#artifact-view"), names = irNames(), index = names.indexOf(name);
    const text = await artifactText(name);
    if (changes && index > 0) {
      const counts = renderDiff(view, lineDiff(await artifactText(names[index - 1]), text), "py");
      $("#ir-summary").textContent = `${counts.added} added, ${counts.removed} removed lines vs ${names[index - 1].replace(/^ir\//, "")}`;
    } else {
      renderCode(view, text, "py");
      $("#ir-summary").textContent = `${text.split("\n").length} lines`;
    }
    view.dataset.artifact = name;
    view.dataset.mode = changes && index > 0 ? "diff" : "text";
  };

  const showArtifact = async (entry) => {
    currentArtifact = entry.name;
    for (const b of document.querySelectorAll("#artifact-tabs button")) b.classList.toggle("active", b.dataset.name === entry.name || (b.dataset.name === "ir" && entry.name.startsWith("ir/")));
    const view = $("#artifact-view");
    $("#ir-controls").hidden = !entry.name.startsWith("ir/");
    if (entry.name.startsWith("ir/")) { $("#ir-pass").value = entry.name; return showIr(entry.name, $("#ir-changes").checked); }
    if (!/^(text\/|application\/json)/.test(entry.media_type)) {
      const save = h("a", { href: "#", id: "artifact-save", onclick: (e) => { e.preventDefault(); saveBlob(artifactPath(entry.name), entry.name.split("/").pop()); } }, "download");
      show(view, h("p", { class: "pad" }, `${entry.name}: ${entry.media_type}, ${bytes(entry.size)} — `, save));
      return;
    }
    let text = await artifactText(entry.name);
    if (currentArtifact !== entry.name) return;
    if (langOf(entry.name) === "json") { try { text = JSON.stringify(JSON.parse(text), null, 2); } catch (_) { /* as is */ } }
    renderCode(view, text, langOf(entry.name));
    view.dataset.artifact = entry.name;
    view.dataset.mode = "text";
    markMapped();
  };

  // the emulator's report and profile are made from what the sandbox answered: a part that cannot be drawn is left
  // out with a note, the rest of the page still shows
  const drawn = (what, draw) => {
    try { return draw(); } catch (error) { console.warn(`${what} not drawn:`, error); return null; }
  };
  const renderArtifacts = async () => {
    const manifest = await apiJson(`${jobApi}/artifacts`);
    const key = manifest.artifacts.map((a) => a.name + a.sha256).join();
    if (key === manifestKey) return;
    manifestKey = key;
    const order = ["compute.cpp", "reader.cpp", "writer.cpp", "main.cpp", "tt.plan.json"];
    const entries = manifest.artifacts.slice().sort((a, b) => ((order.indexOf(a.name) + 1 || 99) - (order.indexOf(b.name) + 1 || 99)) || a.name.localeCompare(b.name));
    const tabs = $("#artifact-tabs");
    if (!entries.length) { show(tabs, h("span", { class: "muted" }, `none${TERMINAL.has(job.status) ? "" : " yet"}`)); return; }
    const ir = entries.filter((a) => a.name.startsWith("ir/"));
    const shown = entries.filter((a) => !a.name.startsWith("ir/") && a.name !== "linemap.json");
    show(tabs, shown.map((a) => h("button", { type: "button", "data-name": a.name, title: `${bytes(a.size)} · sha256 ${a.sha256.slice(0, 12)}` }, a.name)),
      ir.length ? h("button", { type: "button", "data-name": "ir", title: "the IR after each compiler pass" }, `IR (${ir.length} passes)`) : null);
    show($("#ir-pass"), ir.map((a) => h("option", { value: a.name }, a.name.replace(/^ir\//, "").replace(/\.py$/, ""))));
    tabs.onclick = (event) => {
      const button = event.target.closest("button");
      if (!button) return;
      showArtifact(button.dataset.name === "ir" ? ir[0] : entries.find((a) => a.name === button.dataset.name));
    };
    $("#ir-pass").onchange = () => showArtifact(ir.find((a) => a.name === $("#ir-pass").value));
    $("#ir-changes").onchange = () => showIr($("#ir-pass").value, $("#ir-changes").checked);
    const names = new Set(entries.map((a) => a.name));
    if (names.has("linemap.json")) { try { lineMap = JSON.parse(await artifactText("linemap.json")); } catch (_) { lineMap = null; } }
    showArtifact(entries.find((a) => a.name === currentArtifact) || shown[0] || entries[0]);
    if (names.has("tt.plan.json")) {
      const parsed = async (name) => { try { return names.has(name) ? JSON.parse(await artifactText(name)) : null; } catch (_) { return null; } };
      const plan = await parsed("tt.plan.json"), report = await parsed("emulate/report.json"), profile = await parsed("emulate/profile.json");
      if (plan) drawn("plan", () => renderPlan(plan, report, profile));
      if (report) drawn("counters", () => renderCounters(report));
      if (profile) { try { await renderProfile(profile, jobApi); } catch (error) { console.warn("profile not drawn:", error); } }
    }
  };

  const followLog = async () => {
    logStarted = true;
    const log = $("#log");
    const append = (text) => {
      const atBottom = log.scrollTop + log.clientHeight >= log.scrollHeight - 8;
      add(log, renderLog(text));
      if (atBottom) log.scrollTop = log.scrollHeight;
    };
    if (TERMINAL.has(job.status)) { show(log, renderLog(await (await api(`${jobApi}/logs`)).text())); return; }
    // Server-Sent Events over fetch (one reader of the stream, with the API's error handling); a stream that drops
    // before its `end` event, or that the job store's absence ended (`unavailable`), is opened again with
    // Last-Event-ID, from where it broke
    await followEvents(`${jobApi}/logs?follow=1`, (event, data) => { if (event === "log") append(data + "\n"); });
  };

  const refresh = async () => {
    try {
      job = await apiJson(jobApi);
    } catch (error) {
      $("#job-error").hidden = false;
      $("#job-error").textContent = error.status === 404 ? `no job ${jobId}` : error.message;
      if (error.status === 404 && stop) stop();
      return;
    }
    renderHeader();
    renderTimeline();
    if (!sourceShown) await renderSource();
    if (!logStarted) followLog().catch((e) => console.warn("log", e));
    if (job.stages.some((s) => s.state === "succeeded") || TERMINAL.has(job.status)) await renderArtifacts();
    if (TERMINAL.has(job.status) && stop) { stop(); stop = null; if (job.diagnostics.length) await renderSource(); }
  };
  stop = poll(refresh, () => (document.hidden ? 5000 : 700));

  $("#download").addEventListener("click", () => saveBlob(`${jobApi}/bundle?format=${encodeURIComponent($("#bundle-format").value)}`, `tilefarm-${jobId}.${$("#bundle-format").value}`));
  $("#cancel").addEventListener("click", async () => {
    try { await api(jobApi, { method: "DELETE" }); } catch (e) { alert(e.message); }
    if (!stop) stop = poll(refresh, () => 700);
  });
  $("#resubmit").addEventListener("click", async () => {
    try {
      const again = await apiJson(`${jobApi}/resubmit`, { method: "POST", json: {} });
      location.href = jobPath(again.id);
    } catch (e) { $("#job-error").hidden = false; $("#job-error").textContent = `${e.status || ""} ${e.message}`; }
  });
}

// log lines (time, stage, level, text) with the level's colour
function renderLog(text) {
  return text.replace(/\n$/, "").split("\n").map((line) => {
    const m = line.match(/^(\d{4}-\d\d-\d\dT(\d\d:\d\d:\d\d\.\d{3})Z) (\S+) +(INFO|WARN|ERROR) (.*)$/);
    if (!m) return h("div", { class: "log-line" }, line);
    return h("div", { class: `log-line ${m[4].toLowerCase()}${m[5].startsWith("== stage") ? " stage-mark" : ""}`, "data-level": m[4] },
      h("span", { class: "t", title: m[1] }, m[2]), " ", h("span", { class: "s" }, m[3].padEnd(8)), " ",
      h("span", { class: "l" }, m[4].padEnd(5)), " ", m[5]);
  });
}

// ---------- the plan as a picture ----------
// a sequential colour scale (light yellow -> green -> deep blue), t in [0, 1]
const SCALE = [[255, 255, 217], [199, 233, 180], [65, 182, 196], [34, 94, 168], [8, 29, 88]];
function colour(t) {
  const x = Math.min(Math.max(Number(t) || 0, 0), 1) * (SCALE.length - 1), i = Math.min(Math.floor(x), SCALE.length - 2), f = x - i;
  const c = SCALE[i].map((v, k) => Math.round(v + (SCALE[i + 1][k] - v) * f));
  return `rgb(${c.join(",")})`;
}
const coreKey = (core) => (Array.isArray(core) ? core.map(Number).join(",") : String(core));
const entries = (object) => Object.entries(object && typeof object === "object" ? object : {});
const tileOpsText = (ops) => entries(ops).map(([k, v]) => `${k}×${num(v)}`).join(" ");

function renderPlan(plan, report, profile) {
  $("#plan-section").hidden = false;
  const [gx, gy] = plan.core_grid.map(Number);
  const work = new Map(plan.work.cores.map((c) => [coreKey(c.core), c]));
  const reported = Array.isArray(report?.cores) ? report.cores : [];
  const counters = new Map(reported.map((c) => [coreKey(c.core), c]));
  const argsOf = new Map();
  for (const kernel of plan.kernels) {
    for (const pc of kernel.per_core_args) {
      const key = coreKey(pc.core);
      argsOf.set(key, [...(argsOf.get(key) || []), `${kernel.role}: ` + kernel.runtime_args.map((a, i) => `${a.name}=${pc.values[i]}`).join(" ")]);
    }
  }
  const count = (value) => (typeof value === "number" && isFinite(value) ? value : 0);
  const tileOps = (c) => entries(c?.tile_ops).reduce((a, [, v]) => a + count(v), 0);
  const metrics = { blocks: ["blocks per core", (key) => count(work.get(key)?.count)] };
  if (report) {
    metrics.noc_read = ["NoC bytes read", (key) => count(counters.get(key)?.noc_bytes_read)];
    metrics.noc_written = ["NoC bytes written", (key) => count(counters.get(key)?.noc_bytes_written)];
    metrics.tile_ops = ["tile ops", (key) => tileOps(counters.get(key))];
  }
  if (profile && Array.isArray(profile.cores)) {  // the timing model: how busy each core's matrix/SFPU RISC is, in percent of the kernel time
    const modelled = new Map(profile.cores.map((c) => [coreKey(c.core), c]));
    metrics.utilization = ["compute busy %", (key) => Math.round(count(modelled.get(key)?.utilization) * 100)];
  }
  const select = $("#heat-metric");
  const chosen = Object.hasOwn(metrics, select.value) ? select.value : "blocks";
  show(select, entries(metrics).map(([k, [label]]) => h("option", { value: k, selected: k === chosen }, label)));
  select.onchange = () => renderPlan(plan, report, profile);

  const value = metrics[chosen][1];
  let max = 0;
  for (let y = 0; y < gy; y++) for (let x = 0; x < gx; x++) max = Math.max(max, value(`${x},${y}`));
  const cell = Math.max(22, Math.min(46, Math.floor(560 / gx))), pad = 24, legendH = 44;
  const width = pad + gx * cell + 2, height = pad + gy * cell + legendH;
  const grey = { fill: "#656d76" };
  const parts = [];
  for (let x = 0; x < gx; x++) parts.push(svg("text", { x: pad + x * cell + cell / 2, y: 14, "text-anchor": "middle", ...grey }, x));
  for (let y = 0; y < gy; y++) parts.push(svg("text", { x: pad - 6, y: pad + y * cell + cell / 2 + 3, "text-anchor": "end", ...grey }, y));
  for (let y = 0; y < gy; y++) {
    for (let x = 0; x < gx; x++) {
      const key = `${x},${y}`, v = value(key), used = work.has(key) && count(work.get(key).count) > 0;
      const fill = used || v ? colour(max ? v / max : 0) : "#eaeef2";
      parts.push(svg("rect", { class: "core", "data-core": key, "data-value": v, x: pad + x * cell, y: pad + y * cell, width: cell, height: cell, rx: 3, fill }));
      if (cell >= 26 && (used || v)) parts.push(svg("text", { x: pad + x * cell + cell / 2, y: pad + y * cell + cell / 2 + 3, "text-anchor": "middle", fill: max && v / max > 0.55 ? "#fff" : "#24292f" }, v >= 10000 ? Math.round(v / 1024) + "k" : v));
    }
  }
  const ly = pad + gy * cell + 14, lw = Math.min(gx * cell, 240);
  parts.push(svg("defs", null, svg("linearGradient", { id: "heat-scale" }, SCALE.map((c, i) => svg("stop", { offset: `${(i / (SCALE.length - 1)) * 100}%`, "stop-color": `rgb(${c.join(",")})` })))));
  parts.push(svg("rect", { x: pad, y: ly, width: lw, height: 10, fill: "url(#heat-scale)", rx: 2 }));
  parts.push(svg("text", { x: pad, y: ly + 24, ...grey }, "0"), svg("text", { x: pad + lw, y: ly + 24, "text-anchor": "end", ...grey }, max));
  parts.push(svg("text", { x: pad + lw / 2, y: ly + 24, "text-anchor": "middle", ...grey }, `${metrics[chosen][0]} (grey: idle)`));
  const heat = $("#heatmap");
  show(heat, svg("svg", { width, height, role: "img", "aria-label": `core grid heatmap: ${metrics[chosen][0]}` }, parts));

  const tip = $("#heat-tip");
  heat.onmousemove = (event) => {
    const rect = event.target.closest("rect.core");
    if (!rect) { tip.hidden = true; return; }
    const key = rect.dataset.core, w = work.get(key), c = counters.get(key);
    const lines = [`core (${key})`];
    if (w) {
      const blocks = w.blocks.length > 12 ? `${w.blocks.slice(0, 12).join(", ")}, … (${w.blocks.length})` : w.blocks.join(", ");
      lines.push(`blocks: ${w.count}  start ${w.start} stride ${w.stride} row_len ${w.row_len} row_stride ${w.row_stride}`, `  [${blocks}]`);
    } else lines.push("idle: no blocks");
    lines.push(...(argsOf.get(key) || []));
    if (c) lines.push(`NoC: ${num(c.noc_reads)} reads ${bytes(num(c.noc_bytes_read))}, ${num(c.noc_writes)} writes ${bytes(num(c.noc_bytes_written))}`,
      `tile ops: ${tileOpsText(c.tile_ops) || "none"}`);
    tip.textContent = lines.join("\n");
    tip.hidden = false;
    tip.style.left = `${Math.min(event.clientX + 14, window.innerWidth - 470)}px`;
    tip.style.top = `${event.clientY + 14}px`;
  };
  heat.onmouseleave = () => { tip.hidden = true; };

  const used = plan.work.cores.filter((c) => count(c.count) > 0).length;
  $("#plan-summary").textContent = `${plan.kernel} · ${plan.work.blocks} blocks (grid ${plan.grid.extents.join("×")}) on ${used} of ${gx * gy} cores · ${plan.work.policy}`;
  const n = (value) => h("td", { class: "num" }, value);
  show($("#cb-table"),
    h("thead", null, h("tr", null, h("th", { class: "num" }, "id"), h("th", null, "name"), h("th", null, "buffer"), h("th", null, "format"),
      h("th", null, "producer → consumer"), h("th", { class: "num" }, "page size"), h("th", { class: "num" }, "depth"), h("th", { class: "num" }, "L1 bytes"))),
    h("tbody", null, plan.circular_buffers.map((cb) => h("tr", { "data-cb": cb.index }, n(cb.index), h("td", { class: "mono" }, cb.name),
      h("td", { class: "mono" }, cb.buffer), h("td", null, cb.data_format), h("td", null, `${cb.producer} → ${cb.consumer}`),
      n(cb.page_bytes), n(cb.num_pages), n(cb.total_bytes)))),
    h("tfoot", null, h("tr", null, h("th", { colspan: 7 }, "total per core"), h("th", { class: "num" }, plan.l1_bytes_per_core))));
  const available = plan.target.l1_available_for_cbs;
  $("#l1-summary").textContent = `${bytes(plan.l1_bytes_per_core)} of ${bytes(available)} L1 available for CBs (${((plan.l1_bytes_per_core / available) * 100).toFixed(1)}%) · ${plan.circular_buffers.length} of ${plan.target.num_cbs} CBs · ${plan.target.arch}`;
}

const CATEGORIES = ["busy", "wait_cb", "wait_noc", "wait_pipe"];

// profile.json: a summary, a per-core timeline (one row per RISC, each bin coloured by what the RISC did) and the
// user's source lines by modelled cycles
async function renderProfile(profile, jobApi) {
  $("#profile-section").hidden = false;
  const ratio = profile.dram_read_ratio == null ? "" : ` (${Number(profile.dram_read_ratio).toFixed(1)}× the minimum)`;
  $("#profile-summary").textContent = `${(profile.device_time_ns / 1000).toFixed(2)} µs · matrix engine ${(profile.matrix_utilization * 100).toFixed(1)}%${profile.math_fidelity ? ` at ${profile.math_fidelity}` : ""} · DRAM read ${bytes(profile.dram_read_bytes)}${ratio} · ${profile.cores_used} of ${profile.grid_cores} cores${profile.timing_only ? " · timing only" : ""}`;
  $("#profile-verdict").textContent = profile.bottleneck;
  const select = $("#profile-core");
  show(select, profile.cores.map((c, i) => h("option", { value: i }, `(${c.core.join(", ")}) · ${Math.round(c.utilization * 100)}%`)));
  const draw = () => {
    const core = profile.cores[Number(select.value) || 0];
    const label = 140, rowH = 22, width = 620, total = profile.kernel_cycles || 1;
    const parts = [];
    core.riscs.forEach((r, row) => {
      const y = row * rowH;
      parts.push(svg("text", { x: 0, y: y + 15, fill: "#24292f" }, `${r.risc} ${String(r.kernel).replace(".cpp", "")}`),
        svg("rect", { x: label, y: y + 3, width, height: rowH - 6, fill: "#eaeef2" }));
      const t = r.timeline, bins = (t[CATEGORIES[0]] || []).length, scale = width / total;
      for (let b = 0; b < bins; b++) {
        let offset = 0;
        for (const cat of CATEGORIES) {
          const v = t[cat]?.[b] || 0;
          if (v <= 0) continue;
          const barH = (rowH - 6) * (v / t.bin_cycles);
          parts.push(svg("rect", { class: cat, x: label + b * t.bin_cycles * scale, y: y + rowH - 3 - offset - barH, width: Math.max(t.bin_cycles * scale, 0.5), height: barH }, svg("title", null, cat)));
          offset += barH;
        }
      }
      parts.push(svg("title", null, `${r.risc}: busy ${Math.round(r.busy)}, CB ${Math.round(r.wait_cb)}, NoC ${Math.round(r.wait_noc)}, pipe ${Math.round(r.wait_pipe)}, idle ${Math.round(r.idle)} cycles`));
    });
    parts.push(svg("text", { x: label, y: core.riscs.length * rowH + 16, fill: "#656d76" }, "0"),
      svg("text", { x: label + width, y: core.riscs.length * rowH + 16, "text-anchor": "end", fill: "#656d76" }, `${Math.round(total)} cycles`));
    show($("#profile-timeline"), svg("svg", { width: label + width + 10, height: core.riscs.length * rowH + 24, role: "img", "aria-label": `timeline of core ${core.core.join(",")}` }, parts));
  };
  select.onchange = draw;
  draw();
  const source = (await (await api(`${jobApi}/source`)).text()).split("\n");
  renderProfileLines(profile, source);
  for (const [id, name] of [["#profile-trace", "trace.json"], ["#profile-csv", "ops_perf_results.csv"]]) {
    $(id).onclick = (event) => { event.preventDefault(); saveBlob(`${jobApi}/artifacts/emulate/${name}`, name); };
  }
}

function renderCounters(report) {
  $("#counters-section").hidden = false;
  const jit = report.jit && typeof report.jit === "object" ? `${num(report.jit.compiled)} compiled, ${num(report.jit.cache_hits)} cached` : "–";
  const warnings = Array.isArray(report.warnings) ? report.warnings.length : 0;
  $("#counters-summary").textContent = `${report.arch} · run ${duration(Number(report.run_seconds))} · JIT ${jit}${report.error ? ` · error: ${report.error}` : ""}${warnings ? ` · ${warnings} warnings` : ""}`;
  const cores = (Array.isArray(report.cores) ? report.cores : []).filter((c) => c && Array.isArray(c.core))
    .sort((a, b) => a.core[1] - b.core[1] || a.core[0] - b.core[0]);
  const n = (value) => h("td", { class: "num" }, num(value));
  show($("#counters-table"),
    h("thead", null, h("tr", null, h("th", null, "core"), ...["NoC reads", "bytes read", "NoC writes", "bytes written", "DST acquires"].map((t) => h("th", { class: "num" }, t)),
      h("th", null, "tile ops"), h("th", null, "CB high water (pages)"))),
    h("tbody", null, cores.map((c) => h("tr", { "data-core": coreKey(c.core) },
      h("td", { class: "mono" }, `(${c.core.join(", ")})`), n(c.noc_reads), n(c.noc_bytes_read), n(c.noc_writes), n(c.noc_bytes_written), n(c.dst_acquires),
      h("td", { class: "mono" }, tileOpsText(c.tile_ops)),
      h("td", { class: "mono" }, entries(c.cb_high_water_pages).map(([k, v]) => `cb${k}:${num(v)}`).join(" "))))));
}

// ---------- submit (and edit-and-resubmit: /submit?from=<job>) ----------
// a .npy file -> the API's input: {shape, dtype, data: base64 of the little-endian bytes}
const NPY_DTYPES = { "<f4": "float32", "<f2": "float16", "<i4": "int32", "<u4": "uint32", "<i2": "int16", "<u2": "uint16", "|i1": "int8", "|u1": "uint8" };
async function readNpy(file) {
  const buffer = await file.arrayBuffer(), bytes = new Uint8Array(buffer);
  if (String.fromCharCode(...bytes.slice(1, 6)) !== "NUMPY") throw new Error(`${file.name} is not a .npy file`);
  const major = bytes[6], view = new DataView(buffer);
  const headerLength = major === 1 ? view.getUint16(8, true) : view.getUint32(8, true), start = major === 1 ? 10 : 12;
  const header = new TextDecoder().decode(bytes.slice(start, start + headerLength));
  const descr = (header.match(/'descr':\s*'([^']+)'/) || [])[1];
  const dtype = NPY_DTYPES[descr];
  if (!dtype) throw new Error(`${file.name}: dtype ${descr} is not one the service takes (${Object.values(NPY_DTYPES).join(", ")})`);
  if (/'fortran_order':\s*True/.test(header)) throw new Error(`${file.name}: save it in C order`);
  const shape = ((header.match(/'shape':\s*\(([^)]*)\)/) || [])[1] || "").split(",").map((d) => d.trim()).filter(Boolean).map(Number);
  let binary = "";
  const data = bytes.subarray(start + headerLength);
  for (let i = 0; i < data.length; i += 32768) binary += String.fromCharCode(...data.subarray(i, i + 32768));
  return { shape, dtype, data: btoa(binary) };
}

const removeButton = () => h("button", { type: "button", class: "link", "aria-label": "remove", onclick: (event) => event.target.closest(".kv").remove() }, "×");
function paramRow(name = "", value = "") {
  const row = h("div", { class: "kv" }, h("input", { class: "mono", placeholder: "name", "aria-label": "param name" }), h("span", null, "="),
    h("input", { class: "mono", placeholder: "value", "aria-label": "param value" }), removeButton());
  const [nameInput, valueInput] = row.querySelectorAll("input");
  nameInput.value = name;
  valueInput.value = String(value);
  return row;
}
const inputRow = () => h("div", { class: "kv" }, h("input", { class: "mono", placeholder: "buffer", "aria-label": "input buffer name" }),
  h("input", { type: "file", accept: ".npy", "aria-label": "input .npy file" }), removeButton());
// "256" -> 256, "0.5" -> 0.5, "float16" -> "float16" (as `tilefarm --param` reads them)
const paramValue = (text) => (/^-?\d+$/.test(text) ? Number(text) : /^-?(\d+\.\d*|\.\d+|\d+(\.\d*)?[eE][-+]?\d+)$/.test(text) ? Number(text) : text);

function initSubmit() {
  const form = $("#submit-form"), source = $("#source"), error = $("#submit-error");
  const from = new URLSearchParams(location.search).get("from");
  $("#add-param").onclick = () => $("#params").appendChild(paramRow());
  $("#add-input").onclick = () => $("#inputs").appendChild(inputRow());
  $("#upload").addEventListener("change", async (event) => {
    const file = event.target.files[0];
    if (!file) return;
    source.value = await file.text();
    $("#filename").value = file.name.replace(/[^A-Za-z0-9_.\-]/g, "_");
  });
  source.addEventListener("keydown", (event) => {
    if (event.key === "Tab") {
      event.preventDefault();
      source.setRangeText("    ", source.selectionStart, source.selectionEnd, "end");
    } else if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) form.requestSubmit();
  });
  const f = form.elements;
  offerExamples(form);
  if (from) {  // edit and resubmit: the job's source and options, to change and send again
    Promise.all([apiJson(`/v1/jobs/${encodeURIComponent(from)}`), api(`/v1/jobs/${encodeURIComponent(from)}/source`).then((r) => r.text())]).then(([job, text]) => {
      $("#submit-title").textContent = "Edit and resubmit";
      $("#from-banner").hidden = false;
      show($("#from-banner"), "Editing job ", h("a", { class: "mono", href: jobPath(job.id) }, job.id),
        `: what you change here is sent as a new job${Object.keys(job.inputs).length ? ", on the same inputs unless you give others" : ""}.`);
      source.value = text;
      $("#filename").value = job.filename;
      f.entry.value = job.entry || "";
      f.arch.value = job.target.arch;
      f.partition.value = job.target.partition ?? "";
      f.cb_depth.value = job.target.cb_depth ?? "";
      f.math_fidelity.value = job.target.math_fidelity ?? "";
      f.core_grid.value = job.target.core_grid ? job.target.core_grid.join("x") : "";
      f.blocking.value = job.target.blocking;
      f.fp32_accumulation.value = job.target.fp32_accumulation == null ? "" : String(job.target.fp32_accumulation);
      f.l1_shard.value = (job.target.l1_shard || []).join(", ");
      f.dump_ir.checked = job.dump_ir;
      const stages = new Set(job.stages.map((s) => s.name));
      for (const name of ["check", "emulate", "hardware"]) f[name].checked = stages.has(name);
      $("#params").replaceChildren();
      for (const [k, v] of Object.entries(job.params)) $("#params").appendChild(paramRow(k, v));
      $("#keep-inputs-label").hidden = !Object.keys(job.inputs).length;
    }).catch((e) => { error.hidden = false; error.textContent = `cannot load job ${from}: ${e.message}`; });
  }
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    error.hidden = true;
    const target = { arch: f.arch.value };   // options left empty are the compiler's to choose
    if (f.partition.value) target.partition = f.partition.value;
    if (f.cb_depth.value) target.cb_depth = Number(f.cb_depth.value);
    if (f.math_fidelity.value) target.math_fidelity = f.math_fidelity.value;
    if (f.core_grid.value.trim()) target.core_grid = f.core_grid.value.toLowerCase().split("x").map(Number);
    target.blocking = f.blocking.value;
    if (f.fp32_accumulation.value) target.fp32_accumulation = f.fp32_accumulation.value === "true";
    const shards = f.l1_shard.value.split(",").map((n) => n.trim()).filter(Boolean);
    if (shards.length) target.l1_shard = shards;
    const params = {};
    for (const row of $("#params").querySelectorAll(".kv")) {
      const [name, value] = row.querySelectorAll("input");
      if (name.value.trim()) params[name.value.trim()] = paramValue(value.value.trim());
    }
    const body = {
      source: source.value, filename: $("#filename").value || "kernel.py", target, dump_ir: f.dump_ir.checked, params,
      stages: ["compile", ...(f.check.checked ? ["check"] : []), ...(f.emulate.checked ? ["emulate"] : []), ...(f.hardware.checked ? ["hardware"] : [])],
    };
    if (f.entry.value.trim()) body.entry = f.entry.value.trim();
    $("#submit-button").disabled = true;
    try {
      const inputs = {};
      for (const row of $("#inputs").querySelectorAll(".kv")) {
        const [name, file] = row.querySelectorAll("input");
        if (name.value.trim() && file.files[0]) inputs[name.value.trim()] = await readNpy(file.files[0]);
      }
      let job;
      if (from && !Object.keys(inputs).length && $("#keep-inputs").checked) {
        job = await apiJson(`/v1/jobs/${encodeURIComponent(from)}/resubmit`, { method: "POST", json: body });
      } else {
        job = await apiJson("/v1/jobs", { method: "POST", json: { ...body, inputs } });
      }
      location.href = jobPath(job.id);
    } catch (e) {
      error.hidden = false;
      error.textContent = `${e.status || ""} ${e.message}`;
      $("#submit-button").disabled = false;
    }
  });
}

// ---------- two jobs compared: /diff?a=<job>&b=<job>[&timings=1] ----------
// most telling first: options, source, the modelled device figures and verdicts, the generated code; then the other
// artifacts (without their run-to-run fields unless "wall-clock figures" is ticked)
function initDiff() {
  const query = new URLSearchParams(location.search), form = $("#diff-form");
  form.elements.a.value = query.get("a") || "";
  form.elements.b.value = query.get("b") || "";
  form.elements.timings.checked = query.get("timings") === "1";
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const next = { a: form.elements.a.value.trim(), b: form.elements.b.value.trim() };
    if (form.elements.timings.checked) next.timings = "1";
    location.search = new URLSearchParams(next).toString();
  });
  const a = query.get("a"), b = query.get("b");
  if (!a || !b) return;
  const timings = query.get("timings") === "1";
  apiJson(`/v1/jobs/${encodeURIComponent(a)}/diff/${encodeURIComponent(b)}${timings ? "?timings=true" : ""}`).then((d) => {
    const fields = Object.entries(d.request);
    const jobLink = (id) => h("a", { class: "mono", href: jobPath(id) }, id);
    show($("#diff-request"), fields.length
      ? h("table", { class: "grid" }, h("thead", null, h("tr", null, h("th", null, "option"), h("th", null, jobLink(d.a)), h("th", null, jobLink(d.b)))),
        h("tbody", null, fields.map(([k, [x, y]]) => h("tr", { "data-field": k }, h("td", null, k),
          h("td", { class: "mono" }, JSON.stringify(x)), h("td", { class: "mono" }, JSON.stringify(y))))))
      : h("p", { class: "muted" }, "same options"));
    renderPerformance($("#diff-performance"), d);
    const code = d.code || [], others = d.files || [];
    const sections = [];
    if (d.source || d.source_note) sections.push({ name: "source", status: "changed", diff: d.source, note: d.source_note });
    sections.push(...code.filter((file) => file.status !== "same"), ...others.filter((file) => file.status !== "same"));
    const same = [...code, ...others].filter((file) => file.status === "same").length;
    $("#diff-summary").textContent = `${sections.length} changed · ${same} files the same${timings ? " · with wall-clock figures" : ""}`;
    show($("#diff-files"), sections.map((file, i) => {
      const box = h("div", { class: "code diff", id: `diff-${i}` });
      if (file.diff) renderUnified(box, file.diff, file.name === "source" ? "py" : langOf(file.name));
      else add(box, h("p", { class: "muted pad" }, file.note || (file.status === "changed" ? "differs (binary, or too long to show here: compare the bundles)" : `only in ${file.status === "added" ? "the second" : "the first"} job`)));
      return h("section", { class: "diff-file", "data-file": file.name, "data-status": file.status },
        h("h3", null, h("span", { class: "mono" }, file.name), " ", badge(file.status === "changed" ? "running" : "idle", file.status), " ",
          h("span", { class: "muted" }, file.sizes ? `${bytes(file.sizes[0])} → ${bytes(file.sizes[1])}` : "")),
        box);
    }));
  }).catch((e) => { show($("#diff-files"), h("div", { class: "banner error" }, `${e.status || ""} ${e.message}`)); });
}

// ---------- farm ----------
function initFarm() {
  poll(async () => {
    const [devices, queues] = await Promise.all([apiJson("/v1/devices"), apiJson("/ui/queues")]);
    const card = (attributes, n, label, note) => h("div", { class: "card", ...attributes }, h("div", { class: "n" }, n),
      h("div", { class: "label" }, label), h("div", { class: "muted" }, note));
    show($("#queues"), Object.entries(queues.queues).map(([name, depth]) => card({ "data-queue": name }, depth ?? "?", name, "waiting")),
      card({}, (queues.jobs.queued || 0) + (queues.jobs.running || 0), "active jobs", `${queues.jobs.queued || 0} queued · ${queues.jobs.running || 0} running`));
    show($("#devices-body"), devices.length ? devices.map((d) => h("tr", { "data-device": d.id },
      h("td", null, badge(d.state)), h("td", { class: "mono" }, d.id), h("td", null, d.host), h("td", null, d.arch),
      h("td", { class: "num" }, d.device_count),
      h("td", { class: "mono" }, d.current_job ? h("a", { href: jobPath(d.current_job) }, d.current_job) : "–"),
      h("td", null, age(d.last_heartbeat))))
      : h("tr", null, h("td", { colspan: 7, class: "muted" }, "no hardware workers have reported (start one with ",
        h("code", null, "tilefarm worker -Q hardware.<arch>"), " and TILEFARM_DEVICE_ARCH)")));
  }, () => (document.hidden ? 10000 : 2000));
}

// ---------- the verdict, the profile's lines, resumable event streams, examples, the compared figures ----------
const figure = (value, digits = 3) => (typeof value === "number" ? Number(value.toPrecision(digits)).toString() : String(value ?? "–"));

// the verification at the top of the job page: passed or failed, by which run, the worst output's error and the
// tolerance it was held to; one row per output when there are several
function renderVerdict(box, job) {
  const v = job.verification;
  box.hidden = !v;
  if (!v) return;
  box.className = `verdict-banner ${v.passed ? "passed" : "failed"}`;
  box.dataset.passed = String(v.passed);
  const worst = v.worst, outputs = Array.isArray(v.outputs) ? v.outputs : [];
  const tolerance = (o) => `|got − expected| ≤ ${figure(o.atol)} + ${figure(o.rtol)}·|expected|`;
  const lead = h("div", null, h("strong", null, v.passed ? "✓ verified" : "✗ does not match the reference"),
    ` — ${outputs.length} output${outputs.length === 1 ? "" : "s"} of the ${v.by === "hardware" ? "device" : "emulated"} run against the NumPy reference`,
    worst ? ["; worst: ", h("span", { class: "mono" }, worst.name), ` max abs error ${figure(worst.max_abs_err)} (rel ${figure(worst.max_rel_err)}), tolerance ${tolerance(worst)}`] : null,
    worst && !worst.ok ? [`; ${worst.mismatches} of ${worst.size} elements out of tolerance`, worst.first_mismatch ? ` (first: ${worst.first_mismatch})` : null] : null);
  const rows = outputs.length > 1 ? h("div", { class: "scroll" }, h("table", { class: "grid" },
    h("thead", null, h("tr", null, ["output", "shape", "dtype", "max abs", "max rel", "rtol", "atol", ""].map((t) => h("th", null, t)))),
    h("tbody", null, outputs.map((o) => h("tr", { "data-output": o.name }, h("td", { class: "mono" }, o.name), h("td", null, (o.shape || []).join("×")),
      h("td", null, o.dtype), h("td", { class: "num" }, figure(o.max_abs_err)), h("td", { class: "num" }, figure(o.max_rel_err)),
      h("td", { class: "num" }, figure(o.rtol)), h("td", { class: "num" }, figure(o.atol)), h("td", null, o.ok ? "ok" : "out of tolerance")))))) : null;
  show(box, lead, rows);
}

// the user's lines by modelled cycles: the source next to the line number (it stays in view), labelled columns,
// and what the share no line of theirs has is made of
function renderProfileLines(profile, source) {
  const rows = profile.lines.slice().sort((a, b) => b.cycles - a.cycles);
  const cyclesTitle = "the modelled cycles of this line's device calls, summed over every RISC of every core that ran them (busy + waiting)";
  show($("#profile-lines"),
    h("thead", null, h("tr", null, h("th", { class: "num" }, "line"), h("th", null, "source"),
      h("th", { class: "num", title: cyclesTitle }, "cycles (all cores × RISCs)"), h("th", null, "share"),
      h("th", { class: "num" }, "busy"), h("th", { class: "num" }, "waiting"))),
    h("tbody", null, rows.map((r) => {
      const line = Number.isInteger(r.line) && r.line > 0 ? r.line : 0;
      return h("tr", { "data-line": line },
        h("td", { class: "num" }, line ? h("a", { href: `#L${line}` }, line) : "–"),
        h("td", { class: "mono src" }, line ? (source[line - 1] ?? "").trim().slice(0, 100) : "(not a line of yours: code the compiler added, below)"),
        h("td", { class: "num" }, Math.round(r.cycles)),
        h("td", null, h("span", { class: "share", style: { width: `${Math.max(1, Math.round(Number(r.share) * 80) || 1)}px` } }), ` ${(r.share * 100).toFixed(1)}%`),
        h("td", { class: "num" }, Math.round(r.busy)), h("td", { class: "num" }, Math.round(r.wait)));
    })));
  const calls = Array.isArray(profile.unmapped) ? profile.unmapped : [];
  const total = calls.reduce((sum, c) => sum + (Number(c.cycles) || 0), 0) || 1;
  show($("#profile-unmapped"), calls.length ? ["Code the compiler added (no line of yours): ",
    joined(calls.slice(0, 4).map((c) => [`${Math.round((c.cycles / total) * 100)}% `, h("span", { class: "mono" }, c.call),
      ` (${(c.where || []).slice(0, 2).join(", ")}${(c.where || []).length > 2 ? ", …" : ""}): ${c.purpose}`]), "; ")] : null);
}

// Server-Sent Events over fetch, calling onEvent(event, data) for each; a stream that drops before its `end`
// event is opened again with Last-Event-ID (a few times), so nothing is shown twice or missed
async function followEvents(path, onEvent, attempts = 5) {
  let lastId = null, retryAfter = 0;
  for (let attempt = 0; attempt <= attempts; attempt++) {
    try {
      const response = await api(path, { headers: lastId ? { "Last-Event-ID": lastId } : {} });
      const reader = response.body.getReader(), decoder = new TextDecoder();
      let buffer = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer += decoder.decode(value, { stream: true });
        let cut;
        while ((cut = buffer.indexOf("\n\n")) >= 0) {
          const block = buffer.slice(0, cut); buffer = buffer.slice(cut + 2);
          const event = (block.match(/^event: (.*)$/m) || [])[1];
          const id = (block.match(/^id: (.*)$/m) || [])[1];
          const data = block.split("\n").filter((l) => l.startsWith("data: ")).map((l) => l.slice(6)).join("\n");
          if (id) lastId = id;
          if (event === "end") return;
          if (event === "unavailable") {  // the job store went away: come back when it says, from the last event
            retryAfter = (Number(JSON.parse(data || "{}").retry_after) || 2) * 1000;
            break;
          }
          if (event) onEvent(event, data);
        }
        if (retryAfter) break;
      }
    } catch (error) {
      if (error instanceof ApiError) throw error;
    }
    await new Promise((resolve) => setTimeout(resolve, retryAfter || 500 * 2 ** attempt));
    retryAfter = 0;
  }
}

// the submit page's examples (the repository's kernels, with the entry and params their headers run them with)
async function offerExamples(form) {
  const select = $("#example");
  let examples = [];
  try { examples = await apiJson("/ui/examples"); } catch (e) { console.warn("examples", e); return; }
  add(select, examples.map((x, i) => h("option", { value: i }, x.name)));
  select.addEventListener("change", () => {
    const chosen = examples[Number(select.value)];
    if (!chosen || select.value === "") return;
    $("#source").value = chosen.source;
    $("#filename").value = chosen.filename;
    form.elements.entry.value = chosen.entry || "";
    show($("#params"), Object.entries(chosen.params || {}).map(([k, v]) => paramRow(k, v)));
  });
}

// the modelled device figures and verdicts of two jobs (the compare page's second section)
function renderPerformance(box, d) {
  const p = d.performance, [va, vb] = d.verification || [null, null];
  if (!p && !va && !vb) { show(box, h("p", { class: "muted" }, "neither job was emulated")); return; }
  const us = (ns) => (ns == null ? "–" : `${(ns / 1000).toFixed(2)} µs`), pct = (u) => (u == null ? "–" : `${(u * 100).toFixed(1)}%`);
  const said = (v) => (v == null ? "–" : `${v.passed ? "passed" : "FAILED"}${v.worst ? ` (worst ${v.worst.name}: ${figure(v.worst.max_abs_err)})` : ""}`);
  const rows = [];
  if (p) rows.push(["modelled device time", us(p.device_time_ns[0]), us(p.device_time_ns[1]), p.speedup ? `${p.speedup.toFixed(2)}×` : ""],
    ["matrix-engine utilization", pct(p.matrix_utilization[0]), pct(p.matrix_utilization[1]), ""],
    ["DRAM read", bytes(p.dram_read_bytes[0]), bytes(p.dram_read_bytes[1]), ""],
    ["cores", p.cores_used[0] ?? "–", p.cores_used[1] ?? "–", ""], ["math fidelity", p.math_fidelity[0] ?? "–", p.math_fidelity[1] ?? "–", ""],
    ["bottleneck", p.bottleneck[0] ?? "–", p.bottleneck[1] ?? "–", ""]);
  rows.push(["verification", said(va), said(vb), ""]);
  show(box, h("div", { class: "scroll" }, h("table", { class: "grid", id: "diff-performance-table" },
    h("thead", null, h("tr", null, h("th", null, ""), h("th", null, "first"), h("th", null, "second"), h("th", null, "first ÷ second"))),
    h("tbody", null, rows.map(([name, x, y, ratio]) => h("tr", { "data-figure": name }, h("td", null, name), h("td", null, x), h("td", null, y), h("td", null, ratio)))))));
}

document.addEventListener("DOMContentLoaded", () => {
  initToken();
  const page = document.body.dataset.page;
  ({ jobs: initJobs, job: initJob, submit: initSubmit, diff: initDiff, farm: initFarm })[page]?.();
});
