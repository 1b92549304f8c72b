// Curator: a new session. The form's body is sent to POST /v1/console/plan first (nothing
// is created or spent); the plan and the exact body are shown, and only "Confirm" sends
// POST /v1/sessions. A 201 is the session; a 202 (a build started) is polled until done.
import { api, ApiError, frame, h, num, say, sharesPlot, showError } from "./console.js";

const content = document.getElementById("content");
let reviewed = null; // the JSON text of the body whose plan is on screen

function field(id, label, input, hint) {
  return h("div", { class: "field" }, h("label", { for: id }, label), input,
    hint ? h("p", { class: "hint", id: `${id}-hint` }, hint) : null);
}

function text(id, attrs = {}) {
  return h("input", { type: "text", id, spellcheck: "false", ...attrs });
}

function select(id, options, chosen) {
  return h("select", { id }, options.map(([v, l]) => h("option", { value: v, selected: v === chosen }, l)));
}

const form = h("form", { id: "create", class: "card", novalidate: true },
  field("name", "Session name", text("name", { required: true, pattern: "[A-Za-z0-9][A-Za-z0-9_.\\-]{0,63}" })),
  field("data_path", "Private data file on the server", text("data_path", { "aria-describedby": "data_path-hint" }),
    "A CSV or Parquet path under a data directory the operator allowed (pmwcm serve --data-dir)."),
  field("schema_path", "Schema file on the server", text("schema_path", { required: true })),
  field("epsilon", "Total epsilon", h("input", { type: "number", id: "epsilon", min: "0.001", step: "any", value: "1", required: true })),
  field("delta", "Total delta", h("input", { type: "number", id: "delta", min: "0", step: "any", value: "0.000001", required: true })),
  field("prior", "Start (prior)", select("prior", [["marginals", "noisy 2-way marginals (paid)"], ["uniform", "uniform (free)"]], "marginals")),
  field("max_updates", "Most updates T (0: by the budget rule)", h("input", { type: "number", id: "max_updates", min: "0", step: "1", value: "0" })),
  field("after_halt", "After the last update", select("after_halt", [["refuse", "refuse new queries"], ["synthetic", "answer from synthetic data"]], "refuse")),
  field("more", "More parameters (JSON, optional)", h("textarea", { id: "more", "aria-describedby": "more-hint", rows: 3 }),
    'Any PMWConfig field, e.g. {"accountant": "zcdp", "announced_queries": 100}.'),
  h("p", {}, h("button", { type: "submit", id: "review" }, "Review the budget plan"), " ",
    h("button", { type: "button", id: "confirm", class: "secondary", disabled: true }, "Confirm and create")),
);
const planBox = h("section", { id: "plan", "aria-live": "polite" });
const doneBox = h("section", { id: "done", "aria-live": "polite" });

function value(id) {
  return document.getElementById(id).value.trim();
}

function body() {
  let more = {};
  if (value("more")) more = JSON.parse(value("more"));
  const parameters = { prior: value("prior"), after_halt: value("after_halt"), ...more };
  const updates = Number(value("max_updates") || 0);
  if (updates) parameters.max_updates = updates;
  const out = {
    name: value("name"),
    schema_path: value("schema_path"),
    epsilon: Number(value("epsilon")),
    delta: Number(value("delta")),
    parameters,
  };
  if (value("data_path")) out.data_path = value("data_path");
  return out;
}

function showPlan(plan, sent) {
  const pct = (x) => `${Math.round(x * 1000) / 10}%`;
  planBox.replaceChildren(
    h("h2", { id: "plan-title", tabindex: -1 }, "Budget plan"),
    h("div", { class: "grid2" },
      h("div", { class: "card" },
        sharesPlot("How the session's epsilon is split", plan.shares),
        h("dl", { class: "facts" },
          h("dt", {}, "epsilon, delta"), h("dd", {}, `${num(plan.epsilon)}, ${num(plan.delta)} (${plan.accountant} accountant)`),
          h("dt", {}, "paid prior"), h("dd", {}, `${pct(plan.shares.prior)} (epsilon ${num(plan.epsilons.prior)}), ${plan.prior}`),
          h("dt", {}, "sparse vector"), h("dd", {}, `${pct(plan.shares.sparse_vector)} (epsilon ${num(plan.epsilons.sparse_vector)}), ${plan.sparse_vector}`),
          h("dt", {}, "oracle calls"), h("dd", {}, `${pct(plan.shares.oracle)} (epsilon ${num(plan.epsilons.oracle)}) over at most T = ${plan.max_updates} updates`),
          h("dt", {}, "mode"), h("dd", {}, plan.mode),
          h("dt", {}, "records n, attributes d"), h("dd", {}, `${plan.n}, ${plan.attributes}`),
          h("dt", {}, "hypothesis"), h("dd", {}, plan.backend.reason),
          h("dt", {}, "after the last update"), h("dd", {}, plan.after_halt),
        ),
        h("p", { class: "hint" }, "The shares are composed by the accountant to the total; nothing has been spent yet."),
      ),
      h("div", { class: "card" },
        h("h3", {}, "The request that Confirm sends"),
        h("pre", { class: "spec", id: "create-body" }, JSON.stringify(sent, null, 2))),
    ),
  );
  document.getElementById("plan-title").focus();
}

async function review(event) {
  event.preventDefault();
  doneBox.replaceChildren();
  let sent;
  try {
    sent = body();
  } catch (err) {
    say(`More parameters: not valid JSON (${err.message}).`, "error");
    return;
  }
  say("Computing the plan (reads the data's size only)…");
  try {
    const { body: plan } = await api("/v1/console/plan", { method: "POST", body: sent });
    reviewed = JSON.stringify(sent);
    showPlan(plan, sent);
    document.getElementById("confirm").disabled = false;
    say("Review the plan, then confirm to create the session.", "good");
  } catch (err) {
    reviewed = null;
    planBox.replaceChildren();
    document.getElementById("confirm").disabled = true;
    showError(err);
  }
}

// Answers that mean "not ready yet" while a build runs, whatever the status route says.
const NOT_YET = [404, 409, 423, 425, 503];

async function poll(name, where) {
  // A build started (202): ask once a second until it is done, failed or cancelled.
  for (let tries = 0; tries < 3600; tries += 1) {
    await new Promise((resolve) => setTimeout(resolve, 1000));
    let state;
    try {
      ({ body: state } = await api(where));
    } catch (err) {
      if (err instanceof ApiError && NOT_YET.includes(err.status)) {
        say(`Building session ${name}…`);
        continue;
      }
      throw err;
    }
    const phase = String(state?.state ?? state?.status ?? "ready").toLowerCase();
    say(`Building session ${name}: ${phase}…`);
    if (["failed", "cancelled", "canceled", "error"].includes(phase)) {
      throw new Error(`the build of session ${name} ended: ${state?.detail ?? phase}`);
    }
    if (!["building", "pending", "queued", "running", "accepted", "started"].includes(phase)) {
      return state;
    }
  }
  throw new Error(`session ${name} was still building after an hour; see the Sessions page.`);
}

async function confirm() {
  let sent;
  try {
    sent = body();
  } catch {
    sent = null;
  }
  if (!sent || JSON.stringify(sent) !== reviewed) {
    say("The form changed since the plan was shown: review the plan again.", "error");
    document.getElementById("confirm").disabled = true;
    return;
  }
  document.getElementById("confirm").disabled = true;
  say(`Creating session ${sent.name}…`);
  try {
    const response = await api("/v1/sessions", { method: "POST", body: sent });
    if (response.status === 202) {
      const where = response.headers.get("Location") || `/v1/sessions/${encodeURIComponent(sent.name)}`;
      await poll(sent.name, where);
    }
    reviewed = null;
    const q = `?session=${encodeURIComponent(sent.name)}`;
    doneBox.replaceChildren(h("div", { class: "note good" },
      h("p", {}, `Session ${sent.name} is created.`),
      h("p", {}, h("a", { href: `sessions.html` }, "See its budget"), " · ",
        h("a", { href: `tokens.html${q}`, id: "to-tokens" }, "Issue an analyst token"))));
    say(`Session ${sent.name} created.`, "good");
  } catch (err) {
    showError(err);
  }
}

async function main() {
  if (!(await frame("New session"))) return;
  let taken;
  try {
    ({ body: taken } = await api("/v1/sessions")); // the curator's: anyone else gets the 403
  } catch (err) {
    showError(err);
    return;
  }
  const names = taken.map((s) => s.name).join(", ");
  form.querySelector("#name").setAttribute("aria-describedby", "name-hint");
  form.querySelector("#name").after(h("p", { class: "hint", id: "name-hint" },
    names ? `Names taken: ${names}.` : "No session yet."));
  form.addEventListener("submit", review);
  form.addEventListener("input", () => {
    document.getElementById("confirm").disabled = true;
  });
  content.replaceChildren(form, planBox, doneBox);
  document.getElementById("confirm").addEventListener("click", confirm);
}

main();
