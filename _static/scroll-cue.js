/* A box wider than its content area says so before anyone scrolls it.
 *
 * A printed table, a line of code or a markdown table that is wider than its box scrolls
 * sideways inside the box (it never wraps: columns stay aligned). Phones draw no scrollbar until
 * one scrolls, so a cut-off line would look like the whole line. Each box that scrolls gets
 * data-mha-more-right while more of it lies to the right, and data-mha-more-left once it is
 * scrolled; _static/scroll-cue.css draws a shaded edge on that side. Both are updated as the box
 * scrolls, as the window resizes and when a toggle opens (a hidden box has no width), and boxes
 * that scripts add or move later are watched too.
 */
(function () {
  const BOXES = "pre, .pst-scrollable-table-container, .cell_output, .cell_output .output";

  function update(box) {
    const more = box.scrollWidth - box.clientWidth;
    const left = Math.abs(box.scrollLeft);
    box.toggleAttribute("data-mha-more-right", more > 1 && left < more - 1);
    box.toggleAttribute("data-mha-more-left", more > 1 && left > 1);
  }

  function scrollsSideways(box) {
    return ["auto", "scroll"].includes(getComputedStyle(box).overflowX);
  }

  const watched = new WeakSet();
  const resized = new ResizeObserver(function (entries) {
    entries.forEach(function (entry) {
      update(entry.target);
    });
  });

  function watch(root) {
    const boxes = Array.from(root.querySelectorAll(BOXES));
    if (root.matches(BOXES)) boxes.push(root);
    boxes.forEach(function (box) {
      if (watched.has(box) || !scrollsSideways(box)) return;
      watched.add(box);
      box.addEventListener("scroll", function () {
        update(box);
      }, { passive: true });
      resized.observe(box);
      update(box);
    });
  }

  function start() {
    const article = document.querySelector("article.bd-article");
    if (!article) return;
    watch(article);
    new MutationObserver(function (mutations) {
      mutations.forEach(function (mutation) {
        mutation.addedNodes.forEach(function (node) {
          if (node.nodeType === Node.ELEMENT_NODE) watch(node);
        });
      });
    }).observe(article, { childList: true, subtree: true });
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
