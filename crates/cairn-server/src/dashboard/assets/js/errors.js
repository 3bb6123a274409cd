// Collects every error the page meets into `window.cairnErrors`, from the very start: uncaught exceptions, rejected
// promises nobody handled, `console.error`, files that failed to load, and content-security-policy violations.
// The browser tests read the list back and require it to be empty; people see it in the console as usual.
"use strict";
(function () {
  const errors = [];
  window.cairnErrors = errors;
  const note = (what) => errors.push(String(what));

  window.addEventListener("error", (event) => {
    // A failed <script>, <link> or <img> fires a plain event on its element, seen here in the capture phase.
    const target = event.target;
    if (target && target !== window && (target.src || target.href)) {
      note(`failed to load ${target.src || target.href}`);
    } else {
      note(`uncaught: ${event.message} at ${event.filename}:${event.lineno}`);
    }
  }, true);
  window.addEventListener("unhandledrejection", (event) => {
    const reason = event.reason;
    note(`unhandled rejection: ${reason && reason.stack ? reason.stack : reason}`);
  });
  window.addEventListener("securitypolicyviolation", (event) => {
    note(`blocked by the content security policy: ${event.violatedDirective} ${event.blockedURI}`);
  });
  const original = console.error.bind(console);
  console.error = (...args) => {
    note(args.map((a) => (a && a.stack ? a.stack : String(a))).join(" "));
    original(...args);
  };
})();
