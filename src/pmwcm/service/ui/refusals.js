// Curator: refused analysts' queries and the public reasons sent (GET /v1/console/refusals).
import { api, frame, h, showError, table, when } from "./console.js";

const content = document.getElementById("content");

async function main() {
  if (!(await frame("Refusals"))) return;
  const session = new URLSearchParams(window.location.search).get("session");
  const query = session ? `?session=${encodeURIComponent(session)}` : "";
  try {
    const { body: refused } = await api(`/v1/console/refusals${query}`);
    content.replaceChildren(
      h("p", { class: "hint" }, "Kept by this server process since it started (the latest 500). ",
        "A refusal is decided from public inputs only -- the query, the schema, the number of ",
        "records and the budget -- before any data is read, so nothing is spent on it."),
      session ? h("p", {}, `Session ${session} only. `, h("a", { href: "refusals.html" }, "Show every session.")) : "",
      table(session ? `Refusals in session ${session}` : "Refusals in every session",
        ["when", "session", "token", "status", "public reason"],
        refused.map((r) => [when(r.time), r.session, r.token_id, String(r.status), r.reason])));
  } catch (err) {
    showError(err);
  }
}

main();
