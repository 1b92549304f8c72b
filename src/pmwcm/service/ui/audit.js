// Curator: the last pmwcm audit report the operator named (GET /v1/console/audit).
import { api, frame, h, showError, table } from "./console.js";

const content = document.getElementById("content");

async function main() {
  if (!(await frame("Privacy audit"))) return;
  try {
    const { body: audit } = await api("/v1/console/audit");
    if (!audit.found) {
      content.replaceChildren(h("div", { class: "note" },
        h("p", {}, audit.configured ? "The audit report the server was given cannot be read."
          : "No audit report was given to this server."),
        h("p", {}, "Run ", h("code", {}, "pmwcm audit -o audit.md"),
          " and start the server with ", h("code", {}, "PMWCM_AUDIT_REPORT=audit.md pmwcm serve ..."), ".")));
      return;
    }
    const verdict = audit.passed
      ? h("span", { class: "badge good" }, "passed")
      : h("span", { class: "badge bad" }, `failed: ${audit.failures} rows`);
    content.replaceChildren(
      h("section", { class: "card" },
        h("h2", {}, "Last result: ", verdict),
        h("dl", { class: "facts" },
          h("dt", {}, "date"), h("dd", {}, audit.date || "-"),
          h("dt", {}, "command"), h("dd", {}, h("code", {}, audit.command || "-")),
          h("dt", {}, "trials"), h("dd", {}, audit.trials || "-"),
          h("dt", {}, "confidence"), h("dd", {}, audit.confidence || "-")),
        h("p", { class: "hint" }, "Each row compares a lower confidence bound on epsilon, measured on ",
          "neighbouring inputs, with the mechanism's claim; a bound above the claim refutes it.")),
      ...audit.tables.map((t, i) => {
        const failing = (row) => {
          const cell = (name) => row[t.columns.indexOf(name)];
          if (t.columns.includes("must catch")) return cell("must catch") === "yes" && cell("verdict") !== "violation";
          return cell("verdict") === "violation" || (t.columns.includes("ok") && cell("ok") !== "yes");
        };
        // The verdict comes second, so that it is seen without scrolling; timings are left out.
        const judged = ["verdict", "ok"].map((c) => t.columns.indexOf(c)).filter((k) => k > 0);
        const order = [0, ...judged, ...t.columns.map((_, k) => k)
          .filter((k) => k > 0 && !judged.includes(k) && t.columns[k] !== "seconds")];
        const pick = (cells) => order.map((k) => cells[k] ?? "");
        const failed = new Set();
        const picked = t.rows.map((r) => {
          const shown = pick(r);
          if (failing(r)) failed.add(shown);
          return shown;
        });
        // The first table (the mechanisms' verdicts) is open; the longer checks fold.
        return h("details", { open: i === 0 || t.failures > 0 },
          h("summary", {}, h("h2", {}, `${t.title} (${t.rows.length} rows, ${t.failures} failing)`)),
          table(t.title, pick(t.columns), picked, { rowClass: (r) => (failed.has(r) ? "fail" : null) }));
      }));
  } catch (err) {
    showError(err);
  }
}

main();
