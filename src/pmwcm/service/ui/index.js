// Sign in: the pasted token is checked with GET /v1/me, then the caller's first page opens.
import { api, showError, signIn, say } from "./console.js";

const form = document.getElementById("login");
const input = document.getElementById("token");
form.addEventListener("submit", async (event) => {
  event.preventDefault();
  const value = input.value.trim();
  if (!value) return;
  signIn(value);
  input.value = "";
  try {
    const { body } = await api("/v1/me");
    sessionStorage.setItem("pmwcm.me", JSON.stringify(body));
    say(`Signed in as ${body.role}.`, "good");
    window.location.assign(body.role === "curator" ? "sessions.html" : "analyst.html");
  } catch (err) {
    sessionStorage.removeItem("pmwcm.token");
    showError(err);
    input.focus();
  }
});
input.focus();
