// Analyst: the session's budget and schema, a query builder with the spec it sends beside
// it, and the labelled answer (POST /v1/sessions/{name}/queries).
import { api, coefficientPlot, frame, h, num, say, showError, table } from "./console.js";

const content = document.getElementById("content");
const LOSSES = ["logistic", "squared", "hinge", "smoothed_hinge", "huber", "quantile", "absolute"];
const PARAM_OF = { huber: "delta", smoothed_hinge: "gamma", quantile: "tau" };
let session = "";
let attributes = [];

function budgetCard(status, before) {
  const moved = before === undefined ? null
    : h("p", { id: "moved" }, `This answer cost epsilon ${num(status.epsilon_spent - before)} `,
      `(spent ${num(before)} before, ${num(status.epsilon_spent)} now).`);
  return h("section", { class: "card", id: "budget", "aria-labelledby": "budget-h" },
    h("h2", { id: "budget-h" }, "Remaining budget"),
    h("p", { class: "big" }, `epsilon ${num(status.epsilon_remaining)} left of ${num(status.epsilon)}`),
    h("label", { for: "budget-meter" }, "Spent"),
    h("meter", { id: "budget-meter", min: 0, max: status.epsilon, value: status.epsilon_spent,
      high: status.epsilon * 0.9 }, num(status.epsilon_spent)),
    h("dl", { class: "facts" },
      h("dt", {}, "spent"), h("dd", { id: "spent" }, num(status.epsilon_spent)),
      h("dt", {}, "answered"), h("dd", {}, String(status.answered)),
      h("dt", {}, "updates"), h("dd", {}, `${status.updates} of ${status.max_updates}`),
      h("dt", {}, "halted"), h("dd", {}, status.halted ? "yes: new queries are refused" : "no")),
    moved);
}

function schemaCard(schema) {
  return h("section", { class: "card", id: "schema", "aria-labelledby": "schema-h" },
    h("h2", { id: "schema-h" }, `Schema${schema.name ? `: ${schema.name}` : ""}`),
    schema.drafted ? h("p", { class: "note error" }, "This schema was drafted from the data.") : null,
    table("Attributes and their values", ["attribute", "values (in code order)"],
      schema.attributes.map((a) => [a.name, a.values.join(", ")])));
}

function spec() {
  const form = document.getElementById("builder");
  const loss = form.querySelector("#loss").value;
  const target = form.querySelector("#target").value;
  const features = [...form.querySelectorAll("input[name=feature]:checked")]
    .map((box) => box.value).filter((f) => f !== target);
  const out = {
    loss, target, features,
    radius: Number(form.querySelector("#radius").value),
    l2: Number(form.querySelector("#l2").value),
    intercept: form.querySelector("#intercept").checked,
  };
  const param = form.querySelector("#loss_param").value.trim();
  if (PARAM_OF[loss] && param !== "") out.loss_param = Number(param);
  return out;
}

function refresh() {
  const target = document.getElementById("target").value;
  for (const box of document.querySelectorAll("input[name=feature]")) {
    box.disabled = box.value === target;
    if (box.disabled) box.checked = false;
  }
  const loss = document.getElementById("loss").value;
  const param = document.getElementById("loss_param");
  param.disabled = !PARAM_OF[loss];
  document.getElementById("loss_param-label").textContent =
    PARAM_OF[loss] ? `Loss parameter (${loss} ${PARAM_OF[loss]}; empty: default)` : "Loss parameter (none for this loss)";
  document.getElementById("spec").textContent = JSON.stringify(spec(), null, 2);
}

function builder() {
  const names = attributes.map((a) => a.name);
  const numeric = (id, value, attrs) => h("input", { type: "number", id, value, step: "any", ...attrs });
  const form = h("form", { id: "builder", class: "card", "aria-labelledby": "builder-h", novalidate: true },
    h("h2", { id: "builder-h" }, "Query"),
    h("div", { class: "field" }, h("label", { for: "loss" }, "Loss"),
      h("select", { id: "loss" }, LOSSES.map((l) => h("option", { value: l }, l.replace("_", " "))))),
    h("div", { class: "field" }, h("label", { for: "target" }, "Target"),
      h("select", { id: "target" }, names.map((n, i) => h("option", { value: n, selected: i === names.length - 1 }, n)))),
    h("fieldset", {}, h("legend", {}, "Features"),
      h("div", { class: "choices" }, names.map((n) => h("label", {},
        h("input", { type: "checkbox", name: "feature", value: n }), ` ${n}`)))),
    h("div", { class: "field" }, h("label", { for: "radius" }, "Radius (the largest norm of theta)"),
      numeric("radius", "1", { min: "0", max: "100" })),
    h("div", { class: "field" }, h("label", { for: "l2" }, "Ridge (l2 penalty)"), numeric("l2", "0", { min: "0" })),
    h("div", { class: "field inline" }, h("input", { type: "checkbox", id: "intercept", checked: true }),
      h("label", { for: "intercept" }, "Intercept")),
    h("div", { class: "field" }, h("label", { for: "loss_param", id: "loss_param-label" }, "Loss parameter"),
      numeric("loss_param", "", {})),
    h("button", { type: "submit", id: "ask" }, "Ask"));
  form.addEventListener("input", refresh);
  form.addEventListener("change", refresh);
  form.addEventListener("submit", ask);
  const first = form.querySelector("input[name=feature]");
  if (first) first.checked = true;
  const preview = h("section", { class: "card", "aria-labelledby": "spec-h" },
    h("h2", { id: "spec-h" }, "The spec that Ask sends"),
    h("pre", { class: "spec", id: "spec", "aria-live": "off" }, ""));
  return h("div", { class: "grid2" }, form, preview);
}

const CERTIFICATE = {
  hypothesis: "Certified by the sparse vector: the public hypothesis's fit was within the "
    + "threshold of the best fit on the private data, so it was released at no oracle cost.",
  oracle: "A fresh private answer from the oracle (the sparse vector found the hypothesis "
    + "wanting); the hypothesis was updated with it.",
  synthetic: "Not certified: the engine had halted, so this was fitted on its synthetic data.",
};

function answerCard(answer, query) {
  const rows = answer.coefficients.map((name, i) => [name, num(answer.theta[i])]);
  return h("section", { class: "card", id: "answer", "aria-labelledby": "answer-h" },
    h("h2", { id: "answer-h", tabindex: -1 }, `Answer #${answer.index}: ${query.loss} model of ${query.target}`),
    h("div", { class: "grid2" },
      h("div", {},
        table("Coefficients (theta)", ["coefficient", "theta"], rows),
        h("dl", { class: "facts" },
          h("dt", {}, "source"), h("dd", { id: "source" }, answer.source + (answer.repeated ? " (a repeat, free)" : "")),
          h("dt", {}, "certificate"), h("dd", {}, answer.repeated ? "Served again from the log: the same theta, at no cost." : CERTIFICATE[answer.source]),
          h("dt", {}, "epsilon spent"), h("dd", {}, `${num(answer.epsilon_spent)} in the session so far`),
          h("dt", {}, "epsilon left"), h("dd", {}, num(answer.epsilon_remaining)),
          h("dt", {}, "updates"), h("dd", {}, String(answer.updates)),
          h("dt", {}, "on the radius"), h("dd", {}, answer.on_boundary
            ? "yes: |theta| reached the radius; a larger radius may fit better" : "no")),
        answer.warning ? h("p", { class: "note error" }, answer.warning) : null),
      coefficientPlot(`Coefficients of answer ${answer.index}`, answer.coefficients, answer.theta)));
}

async function status() {
  const { body } = await api(`/v1/sessions/${encodeURIComponent(session)}`);
  return body;
}

async function ask(event) {
  event.preventDefault();
  const query = spec();
  const button = document.getElementById("ask");
  button.disabled = true;
  say("Asking…");
  try {
    const before = (await status()).epsilon_spent;
    const key = crypto.randomUUID ? crypto.randomUUID() : String(Math.random()).slice(2);
    const { body: answer } = await api(`/v1/sessions/${encodeURIComponent(session)}/queries`,
      { method: "POST", body: query, headers: { "Idempotency-Key": key } });
    document.getElementById("answer-slot").replaceChildren(answerCard(answer, query));
    document.getElementById("budget").replaceWith(budgetCard(await status(), before));
    say(`Answered from the ${answer.source}.`, "good");
    document.getElementById("answer-h").focus();
  } catch (err) {
    showError(err);
  } finally {
    button.disabled = false;
  }
}

async function main() {
  const who = await frame("Ask a query");
  if (!who) return;
  if (who.role !== "analyst") {
    say("Asking needs an analyst's token: the API refuses queries from the curator's token (403).", "error");
    return;
  }
  session = who.session;
  try {
    const [current, { body: schema }] = await Promise.all([
      status(), api(`/v1/sessions/${encodeURIComponent(session)}/schema`)]);
    attributes = schema.attributes;
    content.replaceChildren(
      h("div", { class: "grid2" }, budgetCard(current), schemaCard(schema)),
      builder(),
      h("div", { id: "answer-slot", "aria-live": "polite" }));
    refresh();
  } catch (err) {
    showError(err);
  }
}

main();
