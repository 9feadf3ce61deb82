/* Every control is named for what it does, in words that include what it shows.
 *
 * myst-nb labels every hidden cell's toggle "Toggle hidden content", whatever it hides, so a
 * screen reader's list of controls reads the same words 69 times and never the visible label
 * ("Reveal the answer", "Show hint 2", "Show the solution"). Here each toggle is named by its
 * visible label and the question it belongs to (the nearest heading above it): "Reveal the answer
 * to: Who computes the output?". Opened, it says "Hide the answer to: …".
 *
 * The theme's buttons whose label leaves out their own visible text (axe's rule
 * label-content-name-mismatch) are named as well: the colour-mode button by the mode its icon
 * shows, the search fields by their words and shortcut.
 * tests/browser/test_reader_controls.py checks the names in Chromium's accessibility tree.
 */
(function () {
  function visibleLabel(summary) {
    const shown = Array.from(summary.querySelectorAll(".admonition-title")).find(function (p) {
      return getComputedStyle(p).display !== "none";
    });
    return (shown || summary).textContent.trim().replace(/\s+/g, " ");
  }

  function headingAbove(element) {
    const headings = document.querySelectorAll("article.bd-article h1, article.bd-article h2, " +
      "article.bd-article h3, article.bd-article h4");
    let above = null;
    headings.forEach(function (heading) {
      if (heading.compareDocumentPosition(element) & Node.DOCUMENT_POSITION_FOLLOWING) {
        above = heading;
      }
    });
    if (!above) return "";
    const copy = above.cloneNode(true);
    copy.querySelectorAll(".headerlink").forEach(function (link) {
      link.remove();
    });
    return copy.textContent.trim().replace(/\s+/g, " ");
  }

  function name(summary, question) {
    const label = visibleLabel(summary);
    if (!question) return label;
    if (/ the answer$/.test(label)) return label + " to: " + question;
    return label + ", for: " + question;
  }

  function nameToggle(details) {
    const summary = details.querySelector(":scope > summary");
    if (!summary) return;
    const question = headingAbove(details);
    const update = function () {
      summary.setAttribute("aria-label", name(summary, question));
    };
    update();
    details.addEventListener("toggle", update);
  }

  function nameColourModeButton(button) {
    const update = function () {
      const mode = document.documentElement.dataset.mode || "auto";
      const icon = button.querySelector('[data-mode="' + mode + '"]');
      const shown = icon && (icon.getAttribute("title") || icon.textContent).trim();
      button.setAttribute("aria-label", shown ? "Color mode: " + shown : "Color mode");
    };
    update();
    new MutationObserver(update).observe(document.documentElement, {
      attributes: true,
      attributeFilter: ["data-mode"],
    });
  }

  function run() {
    document.querySelectorAll('summary[aria-label="Toggle hidden content"]').forEach(function (s) {
      nameToggle(s.parentElement);
    });
    document.querySelectorAll(".theme-switch-button").forEach(nameColourModeButton);
    // A search field shows "Search Ctrl+K": its name comes from those words, not "Search" alone.
    document.querySelectorAll(".search-button-field[aria-label]").forEach(function (button) {
      button.removeAttribute("aria-label");
    });
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", run);
  } else {
    run();
  }
})();
