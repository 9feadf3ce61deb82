/* A box wider than its content area says so before anyone scrolls it.
 *
 * A printed table, a line of code or a markdown table that is wider than its box scrolls
 * sideways inside the box (it never wraps: columns stay aligned). Phones draw no scrollbar until
 * one scrolls, so a cut-off line would look like the whole line. Each box that scrolls gets
 * data-mha-more-right while more of it lies to the right, and data-mha-more-left once it is
 * scrolled; _static/scroll-cue.css draws a shaded edge on that side. Both are updated as the box
 * scrolls, as the window resizes and when a toggle opens (a hidden box has no width).
 */
(function () {
  const BOXES =
    "article.bd-article pre, article.bd-article .pst-scrollable-table-container, " +
    "article.bd-article .cell_output, article.bd-article .cell_output .output";

  function update(box) {
    const more = box.scrollWidth - box.clientWidth;
    const left = Math.abs(box.scrollLeft);
    box.toggleAttribute("data-mha-more-right", more > 1 && left < more - 1);
    box.toggleAttribute("data-mha-more-left", more > 1 && left > 1);
  }

  function scrollsSideways(box) {
    return ["auto", "scroll"].includes(getComputedStyle(box).overflowX);
  }

  function watch() {
    const boxes = Array.from(document.querySelectorAll(BOXES)).filter(scrollsSideways);
    const resized = new ResizeObserver(function (entries) {
      entries.forEach(function (entry) {
        update(entry.target);
      });
    });
    boxes.forEach(function (box) {
      box.addEventListener("scroll", function () {
        update(box);
      }, { passive: true });
      resized.observe(box);
      update(box);
    });
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", watch);
  } else {
    watch();
  }
})();
