// Analyst: the answers released to this token (GET /v1/sessions/{name}/my-answers) and
// the session's remaining budget.
import { api, frame, h, num, say, showError, table } from "./console.js";

const content = document.getElementById("content");

function budget(status) {
  return h("section", { class: "card", id: "budget", "aria-labelledby": "budget-h" },
    h("h2", { id: "budget-h" }, "Remaining budget"),
    h("p", {}, `epsilon ${num(status.epsilon_remaining)} left of ${num(status.epsilon)}`),
    h("label", { for: "budget-meter" }, "Spent"),
    h("meter", { id: "budget-meter", min: 0, max: status.epsilon, value: status.epsilon_spent }, num(status.epsilon_spent)));
}

async function main() {
  const who = await frame("My answers");
  if (!who) return;
  if (who.role !== "analyst") {
    say("This page lists an analyst's own answers: sign in with an analyst's token.", "error");
    return;
  }
  const s = encodeURIComponent(who.session);
  try {
    const [{ body: status }, { body: answers }] = await Promise.all([
      api(`/v1/sessions/${s}`), api(`/v1/sessions/${s}/my-answers`)]);
    content.replaceChildren(
      budget(status),
      table(`Your answers in session ${who.session}`,
        ["#", "loss", "target", "coefficients", "source", "epsilon spent after"],
        answers.map((a) => [String(a.index), a.query.loss, a.query.target,
          h("ul", { class: "coefs" }, a.coefficients.map((c, i) => h("li", {}, `${c}: ${num(a.theta[i])}`))),
          a.source + (a.repeated ? " (repeat)" : ""), num(a.epsilon_spent)])));
  } catch (err) {
    showError(err);
  }
}

main();
