/* Controls that work for every reader: by keyboard, by touch, with a screen reader.
 *
 * - A box that scrolls sideways inside an answer (a wide table of evidence, a figure) can be
 *   scrolled by keyboard: it takes focus (tabindex=0) and says what it holds (role=region with
 *   a name), as axe's rule scrollable-region-focusable asks.
 * - A tooltip is for a mouse's hover: after a tap it would stay on screen over the text until
 *   the next tap elsewhere, so on touch the theme's tooltips are not shown (_static/controls.css).
 * - The chapter list's title link sits in a landmark (the sidebar, named "Book"), so a screen
 *   reader's landmark list reaches all of the page (axe's rule region).
 * - Sphinx marks the bibliography's entries with the deprecated role doc-biblioentry inside a
 *   role=list that also holds back-links: the entries are left as the paragraphs they are.
 */
(function () {
  const SCROLLING_IN_BOXES = ".mha-box pre, .mha-box div, .cell_output:has(img)";

  function scrollsSideways(box) {
    return (
      box.scrollWidth - box.clientWidth > 1 &&
      ["auto", "scroll"].includes(getComputedStyle(box).overflowX)
    );
  }

  function makeScrollableByKeyboard(box) {
    if (box.hasAttribute("tabindex") || !scrollsSideways(box)) return;
    box.setAttribute("tabindex", "0");
    box.setAttribute("role", "region");
    const what = box.querySelector("img") ? "Figure" : "Table";
    box.setAttribute("aria-label", what + " (scrolls sideways: use the arrow keys)");
  }

  function checkBoxes() {
    document.querySelectorAll("article.bd-article").forEach(function (article) {
      article.querySelectorAll(SCROLLING_IN_BOXES).forEach(makeScrollableByKeyboard);
    });
  }

  function run() {
    checkBoxes();
    // A hidden box has no width: look again when a toggle opens and when the window resizes.
    document.addEventListener("toggle", checkBoxes, true);
    window.addEventListener("resize", checkBoxes);
    document.querySelectorAll(".sidebar-primary-items__start").forEach(function (sidebar) {
      const outer = sidebar.closest(".bd-sidebar-primary");
      if (outer && !outer.hasAttribute("role")) {
        outer.setAttribute("role", "region");
        outer.setAttribute("aria-label", "Book");
      }
    });
    document.querySelectorAll('.citation-list[role="list"], [role="doc-biblioentry"]')
      .forEach(function (element) {
        element.removeAttribute("role");
      });
    document.addEventListener(
      "pointerdown",
      function (event) {
        document.documentElement.classList.toggle("mha-touch", event.pointerType === "touch");
      },
      true
    );
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", run);
  } else {
    run();
  }
})();
