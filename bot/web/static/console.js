// relaybot console: small touches only; every page works without it.
// A confirmation step puts the keyboard focus on its answer, and a page's notice is read out.
document.addEventListener("DOMContentLoaded", () => {
  const first = document.querySelector(".confirm button, [role=alert], [role=status]");
  if (first) {
    if (!first.hasAttribute("tabindex") && first.tagName !== "BUTTON") first.setAttribute("tabindex", "-1");
    first.focus();
  }
});
