// memstrata inspector: small progressive enhancements. Every page works without it.
"use strict";
document.addEventListener("DOMContentLoaded", () => {
  // a checkbox that changes what a confirmation lists re-asks the server at once
  for (const box of document.querySelectorAll("input[data-autosubmit]")) {
    box.addEventListener("change", () => box.form.submit());
  }
  // "/" focuses the page's filter or query field, as in many tools
  const field = document.querySelector("[data-shortcut='/']");
  document.addEventListener("keydown", (event) => {
    const tag = (event.target.tagName || "").toLowerCase();
    if (event.key === "/" && field && !["input", "textarea", "select"].includes(tag)) {
      event.preventDefault();
      field.focus();
    }
  });
});
