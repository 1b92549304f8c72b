// Curator: the release log of a session (GET /v1/sessions/{name}/answers), filterable.
import { api, frame, h, num, sessionPicker, showError, table } from "./console.js";

const content = document.getElementById("content");
const out = h("section", { id: "log", "aria-live": "polite" });
let rows = [];

function filters() {
  const source = h("select", { id: "f-source" }, ["", "hypothesis", "oracle", "synthetic"].map(
    (s) => h("option", { value: s }, s || "any")));
  const tokenPick = h("select", { id: "f-token" }, h("option", { value: "" }, "any"));
  const words = h("input", { type: "search", id: "f-text", spellcheck: "false" });
  const box = h("form", { class: "card", id: "filters", role: "search" },
    h("div", { class: "field inline" }, h("label", { for: "f-source" }, "Source"), source),
    h("div", { class: "field inline" }, h("label", { for: "f-token" }, "Token"), tokenPick),
    h("div", { class: "field inline" }, h("label", { for: "f-text" }, "Loss or attribute contains"), words));
  box.addEventListener("input", render);
  box.addEventListener("submit", (e) => e.preventDefault());
  return box;
}

function render() {
  const source = document.getElementById("f-source").value;
  const tokenId = document.getElementById("f-token").value;
  const words = document.getElementById("f-text").value.trim().toLowerCase();
  const shown = rows.filter((r) => (!source || r.source === source)
    && (!tokenId || r.token_id === tokenId)
    && (!words || [r.query.loss, r.query.target, ...(r.query.features || [])].join(" ").toLowerCase().includes(words)));
  out.replaceChildren(
    h("p", {}, `${shown.length} of ${rows.length} answers shown.`),
    table("Released answers", ["#", "token", "loss", "target", "features", "radius", "source", "repeated", "theta"],
      shown.map((r) => [String(r.index), r.token_id || "-", r.query.loss, r.query.target,
        (r.query.features || []).join(", "), num(r.query.radius), r.source, r.repeated ? "yes" : "no",
        r.theta.map(num).join(", ")])));
}

async function show(name) {
  try {
    ({ body: rows } = await api(`/v1/sessions/${encodeURIComponent(name)}/answers`));
    const pick = document.getElementById("f-token");
    const ids = [...new Set(rows.map((r) => r.token_id).filter(Boolean))];
    pick.replaceChildren(h("option", { value: "" }, "any"), ...ids.map((id) => h("option", { value: id }, id)));
    render();
  } catch (err) {
    out.replaceChildren();
    showError(err);
  }
}

async function main() {
  if (!(await frame("Answer log"))) return;
  try {
    const picker = await sessionPicker(show);
    content.replaceChildren(picker.control, filters(), out);
    if (picker.chosen) await show(picker.chosen);
  } catch (err) {
    showError(err);
  }
}

main();
