/* Printing: light colours and every toggle open (see _static/print.css), then back as it was.
 *
 * Browsers announce a print with "beforeprint"; a print preview or an emulated print medium only
 * switches the "print" media query, so both start the print view.
 */
(function () {
  let saved = null;

  function startPrint() {
    if (saved) return;
    const root = document.documentElement;
    const closed = Array.from(document.querySelectorAll("article details:not([open])"));
    saved = { theme: root.dataset.theme, closed: closed };
    root.dataset.theme = "light";
    closed.forEach(function (details) {
      details.open = true;
    });
  }

  function endPrint() {
    if (!saved) return;
    if (saved.theme) document.documentElement.dataset.theme = saved.theme;
    saved.closed.forEach(function (details) {
      details.open = false;
    });
    saved = null;
  }

  window.addEventListener("beforeprint", startPrint);
  window.addEventListener("afterprint", endPrint);
  window.matchMedia("print").addEventListener("change", function (query) {
    if (query.matches) startPrint();
    else endPrint();
  });
})();
