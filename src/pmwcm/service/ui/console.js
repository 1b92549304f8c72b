// The console's shared parts: the token, calls to the JSON API, the page frame, tables
// and the SVG plots. Every page is a view over the /v1 API: what it shows is what the
// API answered to this token, errors included (a 403 is shown, never worked around).
//
// The token lives in this tab's sessionStorage and travels only in the Authorization
// header; it is never put in a URL, a form submission or the console's own output.

const TOKEN_KEY = "pmwcm.token";
const ME_KEY = "pmwcm.me";
const SVG_NS = "http://www.w3.org/2000/svg";

export const CURATOR_PAGES = [
  ["sessions.html", "Sessions"],
  ["create.html", "New session"],
  ["tokens.html", "Tokens"],
  ["answers.html", "Answer log"],
  ["refusals.html", "Refusals"],
  ["audit.html", "Audit"],
];
export const ANALYST_PAGES = [
  ["analyst.html", "Ask a query"],
  ["history.html", "My answers"],
];

export function token() {
  return sessionStorage.getItem(TOKEN_KEY);
}

export function signIn(value) {
  sessionStorage.setItem(TOKEN_KEY, value);
  sessionStorage.removeItem(ME_KEY);
}

export function signOut() {
  sessionStorage.removeItem(TOKEN_KEY);
  sessionStorage.removeItem(ME_KEY);
  window.location.assign("index.html");
}

/** An error status from the API, with the server's one-line detail. */
export class ApiError extends Error {
  constructor(status, detail) {
    super(`HTTP ${status}: ${detail}`);
    this.status = status;
    this.detail = detail;
  }
}

function detailOf(body, fallback) {
  if (body && typeof body === "object" && "detail" in body) {
    const d = body.detail;
    if (Array.isArray(d)) {
      return d.map((e) => `${(e.loc || []).join(".")}: ${e.msg}`).join("; ");
    }
    return String(d);
  }
  return fallback;
}

/**
 * Calls the API with this tab's token. Resolves to {status, body, headers} for a 2xx;
 * throws ApiError otherwise.
 */
export async function api(path, { method = "GET", body, headers = {} } = {}) {
  const sent = { Accept: "application/json", ...headers };
  const current = token();
  if (current) sent.Authorization = `Bearer ${current}`;
  const init = { method, headers: sent, cache: "no-store", credentials: "omit" };
  if (body !== undefined) {
    sent["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const response = await fetch(path, init);
  const text = await response.text();
  let parsed = null;
  try {
    parsed = text ? JSON.parse(text) : null;
  } catch {
    parsed = null;
  }
  if (!response.ok) {
    throw new ApiError(response.status, detailOf(parsed, response.statusText));
  }
  return { status: response.status, body: parsed, headers: response.headers };
}

/** The calling token's identity (GET /v1/me), cached for this tab. */
export async function me() {
  const cached = sessionStorage.getItem(ME_KEY);
  if (cached) return JSON.parse(cached);
  const { body } = await api("/v1/me");
  sessionStorage.setItem(ME_KEY, JSON.stringify(body));
  return body;
}

/** h("p", {class: "x"}, "text", child): an element; strings become text nodes (never HTML). */
export function h(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === false || value === null || value === undefined) continue;
    if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function svg(tag, attrs = {}, ...children) {
  const node = document.createElementNS(SVG_NS, tag);
  for (const [key, value] of Object.entries(attrs)) node.setAttribute(key, String(value));
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

/** A number for people: 4 decimals where that reads well, else 3 significant digits. */
export function num(x) {
  if (x === null || x === undefined || Number.isNaN(x)) return "-";
  const a = Math.abs(x);
  if (a === 0) return "0";
  if (a >= 1e-3 && a < 1e5) return String(Number(x.toFixed(4)));
  return x.toExponential(2);
}

export function when(seconds) {
  if (seconds === null || seconds === undefined) return "-";
  return new Date(seconds * 1000).toISOString().replace("T", " ").slice(0, 19) + " UTC";
}

/** Shows a message in the page's live status region (errors are read out at once). */
export function say(text, kind = "info") {
  const region = document.getElementById("status");
  region.replaceChildren(text ? h("p", { class: `note ${kind}` }, text) : "");
}

/** Shows an API error: a 401 or 403 says which token is needed. */
export function showError(err) {
  if (!(err instanceof ApiError)) {
    say(`Error: ${err.message}`, "error");
    return;
  }
  const hint = {
    401: " Sign in again with a valid token.",
    403: " This page is not open to your token.",
  }[err.status] || "";
  say(`${err.status} ${err.detail}${hint}`, "error");
}

/** The page frame: skip link target, the navigation of the caller's role, sign out. */
export async function frame(title) {
  document.title = `${title} - pmwcm console`;
  if (!token()) {
    window.location.replace("index.html");
    return null;
  }
  let who = null;
  try {
    who = await me();
  } catch (err) {
    showError(err);
  }
  const pages = who?.role === "curator" ? CURATOR_PAGES : who ? ANALYST_PAGES : [];
  const here = window.location.pathname.split("/").pop();
  const nav = document.getElementById("nav");
  nav.replaceChildren(
    h("ul", {}, pages.map(([href, label]) =>
      h("li", {}, h("a", { href, "aria-current": href === here ? "page" : null }, label)))),
    h("p", { class: "who" },
      who ? `${who.role}${who.session ? ` of session ${who.session}` : ""} (token ${who.token_id})` : "",
      " ",
      h("button", { type: "button", onclick: signOut }, "Sign out")),
  );
  return who;
}

/** A table from rows of cells; `caption` names it for screen readers. */
export function table(caption, columns, rows, { rowClass } = {}) {
  return h("div", { class: "scroll", role: "region", "aria-label": caption, tabindex: 0 },
    h("table", {},
      h("caption", {}, caption),
      h("thead", {}, h("tr", {}, columns.map((c) => h("th", { scope: "col" }, c)))),
      h("tbody", {}, rows.length
        ? rows.map((r) => h("tr", { class: rowClass ? rowClass(r) : null },
          r.map((cell) => h("td", {}, cell))))
        : h("tr", {}, h("td", { colspan: columns.length }, "None yet.")))));
}

/** A <select> of the curator's sessions, kept in the URL's ?session= (a name, not a secret). */
export async function sessionPicker(onChange) {
  const { body: sessions } = await api("/v1/sessions");
  const params = new URLSearchParams(window.location.search);
  const chosen = params.get("session") || sessions[0]?.name || "";
  const select = h("select", { id: "session-pick" },
    sessions.map((s) => h("option", { value: s.name, selected: s.name === chosen }, s.name)));
  select.addEventListener("change", () => {
    const url = new URL(window.location.href);
    url.searchParams.set("session", select.value);
    window.history.replaceState(null, "", url);
    onChange(select.value);
  });
  const label = h("label", { for: "session-pick" }, "Session ");
  return { control: h("p", { class: "picker" }, label, select), chosen, sessions };
}

/**
 * The budget spent after each ledger debit, as a step line, with the total as a dashed
 * line. `points` are [debit number, epsilon spent after it].
 */
export function budgetPlot(title, points, total) {
  const W = 480, H = 220, L = 56, R = 16, T = 16, B = 44;
  const n = Math.max(points.length, 1);
  const x = (i) => L + (i / n) * (W - L - R);
  const y = (e) => T + (1 - e / total) * (H - T - B);
  let path = `M ${x(0)} ${y(0)}`;
  points.forEach(([i, e]) => { path += ` H ${x(i)} V ${y(e)}`; }); // each debit is a step up
  const id = `plot-${Math.random().toString(36).slice(2)}`;
  const last = points.length ? points[points.length - 1][1] : 0;
  const ticks = [0, total / 2, total];
  return svg("svg", { viewBox: `0 0 ${W} ${H}`, role: "img", "aria-labelledby": `${id}-t ${id}-d`, class: "plot" },
    svg("title", { id: `${id}-t` }, title),
    svg("desc", { id: `${id}-d` }, `Epsilon spent after each of ${points.length} ledger debits: ${num(last)} of ${num(total)}.`),
    ticks.map((t) => [
      svg("line", { x1: L, x2: W - R, y1: y(t), y2: y(t), class: "grid" }),
      svg("text", { x: L - 6, y: y(t) + 4, "text-anchor": "end", class: "tick" }, num(t)),
    ]),
    svg("line", { x1: L, x2: W - R, y1: y(total), y2: y(total), class: "total" }),
    svg("text", { x: W - R, y: y(total) - 4, "text-anchor": "end", class: "tick" }, "total epsilon"),
    svg("path", { d: path, class: "spent" }),
    points.map(([i, e]) => svg("circle", { cx: x(i), cy: y(e), r: 3, class: "spent-dot" })),
    svg("text", { x: (L + W - R) / 2, y: H - 8, "text-anchor": "middle", class: "axis" }, "ledger debit (in order)"),
    svg("text", { x: 14, y: (T + H - B) / 2, "text-anchor": "middle", class: "axis",
      transform: `rotate(-90 14 ${(T + H - B) / 2})` }, "epsilon spent"),
    [...new Set([0, n])].map((i) => svg("text", { x: x(i), y: H - B + 16, "text-anchor": "middle", class: "tick" }, String(i))),
  );
}

/** Horizontal bars, one per coefficient, around a zero line; values printed beside them. */
export function coefficientPlot(title, names, values) {
  // The label column is as wide as the longest name (at most 8.5 px a character at 13 px).
  const longest = Math.min(40, Math.max(8, ...names.map((nm) => nm.length)));
  const row = 26, L = 16 + 8.5 * longest, R = 70, T = 10;
  const W = L + 400, H = T * 2 + row * names.length + 20;
  const m = Math.max(1e-12, ...values.map((v) => Math.abs(v)));
  const zero = L + (W - L - R) / 2;
  const scale = (W - L - R) / 2 / m;
  const id = `plot-${Math.random().toString(36).slice(2)}`;
  return svg("svg", { viewBox: `0 0 ${W} ${H}`, role: "img", "aria-labelledby": `${id}-t ${id}-d`, class: "plot" },
    svg("title", { id: `${id}-t` }, title),
    svg("desc", { id: `${id}-d` }, names.map((nm, i) => `${nm} ${num(values[i])}`).join(", ")),
    svg("line", { x1: zero, x2: zero, y1: T - 4, y2: H - 16, class: "zero" }),
    names.map((nm, i) => {
      const v = values[i];
      const yTop = T + i * row;
      const x0 = v >= 0 ? zero : zero + v * scale;
      return [
        svg("text", { x: L - 8, y: yTop + row / 2 + 4, "text-anchor": "end", class: "label" },
          nm.length > 40 ? `${nm.slice(0, 39)}…` : nm),
        svg("rect", { x: x0, y: yTop + 4, width: Math.max(1, Math.abs(v) * scale), height: row - 8,
          class: v >= 0 ? "bar pos" : "bar neg" }),
        svg("text", { x: W - R + 6, y: yTop + row / 2 + 4, class: "tick" }, num(v)),
      ];
    }),
    svg("text", { x: zero, y: H - 2, "text-anchor": "middle", class: "tick" }, "0"),
  );
}

/** Shares of epsilon as one stacked bar with a legend (the budget plan). */
export function sharesPlot(title, shares) {
  const W = 480, H = 70, L = 8, R = 8;
  const parts = Object.entries(shares).filter(([, v]) => v > 0);
  let at = L;
  const id = `plot-${Math.random().toString(36).slice(2)}`;
  return svg("svg", { viewBox: `0 0 ${W} ${H}`, role: "img", "aria-labelledby": `${id}-t ${id}-d`, class: "plot" },
    svg("title", { id: `${id}-t` }, title),
    svg("desc", { id: `${id}-d` }, parts.map(([k, v]) => `${k} ${Math.round(v * 1000) / 10}%`).join(", ")),
    parts.map(([k, v], i) => {
      const w = v * (W - L - R);
      const x0 = at;
      at += w;
      return [
        svg("rect", { x: x0, y: 8, width: w, height: 26, class: `share s${i}` }),
        svg("rect", { x: L + i * 160, y: 46, width: 12, height: 12, class: `share s${i}` }),
        svg("text", { x: L + i * 160 + 16, y: 57, class: "label" },
          `${k.replace("_", " ")}: ${Math.round(v * 1000) / 10}%`),
      ];
    }),
  );
}
