// Curator: every session's budget (GET /v1/sessions, /v1/sessions/{name}, .../ledger).
import { api, budgetPlot, frame, h, num, showError, table, when } from "./console.js";

const content = document.getElementById("content");

async function card(session) {
  const name = session.name;
  const [{ body: status }, { body: ledger }] = await Promise.all([
    api(`/v1/sessions/${encodeURIComponent(name)}`),
    api(`/v1/sessions/${encodeURIComponent(name)}/ledger`),
  ]);
  const points = ledger.entries.map((e, i) => [i + 1, e.epsilon_after]);
  const q = `?session=${encodeURIComponent(name)}`;
  return h("section", { class: "card", "aria-labelledby": `s-${name}` },
    h("h2", { id: `s-${name}` }, name),
    h("dl", { class: "facts" },
      h("dt", {}, "epsilon spent"), h("dd", {}, `${num(status.epsilon_spent)} of ${num(status.epsilon)}`),
      h("dt", {}, "epsilon left"), h("dd", {}, num(status.epsilon_remaining)),
      h("dt", {}, "delta"), h("dd", {}, num(status.delta)),
      h("dt", {}, "answered"), h("dd", {}, String(status.answered)),
      h("dt", {}, "updates"), h("dd", {}, `${status.updates} of ${status.max_updates}`),
      h("dt", {}, "halted"), h("dd", {}, status.halted ? "yes" : "no"),
      h("dt", {}, "accountant"), h("dd", {}, ledger.accountant),
      h("dt", {}, "data"), h("dd", {}, session.data_path || session.table || "-"),
      h("dt", {}, "created"), h("dd", {}, when(session.created)),
    ),
    h("label", { for: `m-${name}` }, "Budget spent"),
    h("meter", { id: `m-${name}`, min: 0, max: status.epsilon, value: status.epsilon_spent,
      high: status.epsilon * 0.9 }, num(status.epsilon_spent)),
    budgetPlot(`Epsilon spent over the ledger of session ${name}`, points, status.epsilon),
    h("details", {}, h("summary", {}, `Ledger: ${ledger.entries.length} debits`),
      table(`Ledger of session ${name}`, ["#", "debit", "epsilon after", "orphan"],
        ledger.entries.map((e) => [String(e.seq), e.label, num(e.epsilon_after), e.orphan ? "yes" : "no"]))),
    h("p", {}, h("a", { href: `tokens.html${q}` }, `Tokens of ${name}`), " · ",
      h("a", { href: `answers.html${q}` }, `Answers of ${name}`), " · ",
      h("a", { href: `refusals.html${q}` }, `Refusals of ${name}`)),
  );
}

async function main() {
  if (!(await frame("Sessions"))) return;
  try {
    const { body: sessions } = await api("/v1/sessions");
    if (!sessions.length) {
      content.replaceChildren(h("p", {}, "No session yet. ", h("a", { href: "create.html" }, "Create one.")));
      return;
    }
    content.replaceChildren(h("p", {}, "Loading the sessions' budgets…"));
    const cards = await Promise.all(sessions.map(card));
    content.replaceChildren(h("div", { class: "grid2" }, cards));
  } catch (err) {
    content.replaceChildren();
    showError(err);
  }
}

main();
