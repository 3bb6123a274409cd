// Asking for the server's token when the API answers 401, and remembering it in this browser.

import { setToken, forgetToken, token } from "./api.js";

let pending = null;

/**
 * Shows the token dialog and resolves once a token was entered. Calls made while it is open share it.
 * @param {boolean} refused whether the token in use was just refused (so the dialog says so).
 */
export function askForToken(refused) {
  if (pending) return pending;
  const dialog = document.getElementById("token-dialog");
  const form = document.getElementById("token-form");
  const input = document.getElementById("token-input");
  const message = document.getElementById("token-error");
  message.hidden = !refused;
  message.textContent = refused ? "The server refused that token; check it and try again." : "";
  input.value = "";
  pending = new Promise((resolve) => {
    const submitted = (event) => {
      event.preventDefault();
      const value = input.value.trim();
      if (!value) return;
      setToken(value);
      form.removeEventListener("submit", submitted);
      dialog.close();
      pending = null;
      showForget();
      resolve();
    };
    form.addEventListener("submit", submitted);
    // Escape would close the dialog with nothing entered: keep it open, the page cannot work without a token.
    // Assigned, not added: the dialog opens again after every refused token.
    dialog.oncancel = (event) => event.preventDefault();
  });
  dialog.showModal();
  input.focus();
  return pending;
}

/** Shows "Forget the token" while one is saved. */
export function showForget() {
  const button = document.getElementById("forget-token");
  button.hidden = !token();
}

export function setUpForget(onForget) {
  const button = document.getElementById("forget-token");
  button.addEventListener("click", () => {
    forgetToken();
    showForget();
    onForget();
  });
  showForget();
}
