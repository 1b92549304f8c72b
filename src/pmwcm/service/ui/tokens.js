// Curator: the tokens of a session and their roles (GET/POST /v1/sessions/{name}/tokens,
// DELETE /v1/tokens/{id}). A new token is shown once, here, and nowhere else.
import { api, frame, h, say, sessionPicker, showError, table, when } from "./console.js";

const content = document.getElementById("content");
const list = h("section", { id: "tokens", "aria-live": "polite" });
const issued = h("section", { id: "issued", "aria-live": "polite" });
let current = "";

async function revoke(id) {
  try {
    await api(`/v1/tokens/${encodeURIComponent(id)}`, { method: "DELETE" });
    say(`Token ${id} revoked.`, "good");
    await show(current);
  } catch (err) {
    showError(err);
  }
}

async function show(name) {
  current = name;
  issued.replaceChildren();
  try {
    const [{ body: tokens }, { body: who }] = await Promise.all([
      api(`/v1/sessions/${encodeURIComponent(name)}/tokens`), api("/v1/me")]);
    const rows = [[who.token_id, "curator", "(you)", "all sessions", "-", "-", ""]];
    for (const t of tokens) {
      const action = t.revoked ? "" : h("button", { type: "button", class: "secondary",
        onclick: () => revoke(t.token_id), "aria-label": `Revoke token ${t.token_id}` }, "Revoke");
      rows.push([t.token_id, t.role, t.label || "-", t.session, when(t.created),
        t.revoked ? when(t.revoked) : "active", action]);
    }
    list.replaceChildren(table(`Tokens that can use session ${name}`,
      ["token id", "role", "label", "session", "created", "revoked", ""], rows));
  } catch (err) {
    list.replaceChildren();
    showError(err);
  }
}

async function issue(event) {
  event.preventDefault();
  const label = document.getElementById("label").value.trim();
  try {
    const { body: t } = await api(`/v1/sessions/${encodeURIComponent(current)}/tokens`,
      { method: "POST", body: { label } });
    await show(current);
    issued.replaceChildren(h("div", { class: "note good" },
      h("p", {}, `Analyst token ${t.token_id} for session ${t.session}: copy it now, it is not shown again.`),
      h("label", { for: "new-token" }, "New token"),
      h("input", { type: "text", id: "new-token", class: "token-once", readonly: true, value: t.token,
        spellcheck: "false", autocomplete: "off" })));
    document.getElementById("new-token").select();
    document.getElementById("new-token").focus();
  } catch (err) {
    showError(err);
  }
}

async function main() {
  if (!(await frame("Tokens"))) return;
  try {
    const picker = await sessionPicker(show);
    const form = h("form", { id: "issue", class: "card" },
      h("div", { class: "field" }, h("label", { for: "label" }, "Label of a new analyst token"),
        h("input", { type: "text", id: "label", maxlength: 200, spellcheck: "false" })),
      h("button", { type: "submit" }, "Issue an analyst token"));
    form.addEventListener("submit", issue);
    content.replaceChildren(picker.control, list, form, issued);
    if (picker.chosen) await show(picker.chosen);
  } catch (err) {
    showError(err);
  }
}

main();
