/* Each line of the book's code in a box of its own, so that a line that wraps keeps its shape.
 *
 * Code wraps where it is wider than its box (on a phone; a solution at every width). Wrapped to
 * the box's left edge, a continuation would read as a new statement or a dedent. Here every line
 * of a code block (a code cell's input, a solution's or a listing's code) is put in a
 * <span class="mha-line"> that knows its own indentation (--mha-indent, in characters), and
 * _static/code-lines.css hangs its continuation rows 4 characters right of where the line's text
 * starts, each behind a continuation mark drawn by CSS (not text: copying, the copy button and
 * the live editor get the lines exactly as written).
 *
 * Printed output (what a cell prints, outside an answer box) is split the same way, each line
 * told apart: a row of a table (a gap of two spaces or more inside it: its columns must stay
 * aligned, so it never wraps) is a span.mha-row, any other line a span.mha-line that wraps as
 * code does. The box gets --mha-widest, its widest row in characters, so that on a phone the CSS
 * can set a table small enough to fit, down to a legible floor.
 * Blocks added later (an answer box's code, drawn when its cell runs live) are split too.
 * tests/browser/test_phone_reading.py measures both at 390 px.
 */
(function () {
  const CODE = "div.highlight pre, .cell_output pre";
  /* Code, not what a cell prints: a cell's input, and a solution's or listing's code in a box. */
  const IS_CODE =
    ".cell_input pre, .mha-box div.highlight pre, div.highlight pre:not(.cell_output pre)";
  /* What a cell prints (an answer box's evidence keeps its own layout: _static/phone-boxes.css). */
  const PRINTED = ".cell_output pre:not(.mha-box pre)";
  /* A row of a printed table: a gap of two spaces or more after its text has started. */
  const ROW = /\S {2,}\S/;

  /* The nodes of ``pre``, split at its newlines: a list of lines, each a list of nodes. A token
   * that spans lines (a docstring) becomes one copy of itself per line. */
  function linesOf(pre) {
    const lines = [[]];
    pre.childNodes.forEach(function (node) {
      const pieces = node.textContent.split("\n");
      pieces.forEach(function (piece, i) {
        if (i > 0) lines.push([]);
        if (!piece) return;
        if (pieces.length === 1) {
          lines[lines.length - 1].push(node.cloneNode(true));
        } else if (node.nodeType === Node.TEXT_NODE) {
          lines[lines.length - 1].push(document.createTextNode(piece));
        } else {
          const part = node.cloneNode(false);
          part.textContent = piece;
          lines[lines.length - 1].push(part);
        }
      });
    });
    return lines;
  }

  function split(pre) {
    const printed = pre.matches(PRINTED);
    if (pre.dataset.mhaLines !== undefined || !(printed || pre.matches(IS_CODE))) return;
    pre.dataset.mhaLines = printed ? "printed" : "code";
    const lines = linesOf(pre);
    let widest = 0;
    const levels = [[0, 0]]; // [indentation, drawn indentation] of the lines this one is inside
    const rebuilt = document.createDocumentFragment();
    lines.forEach(function (nodes, i) {
      if (i > 0) rebuilt.append("\n");
      const text = nodes.map(function (node) { return node.textContent; }).join("");
      if (!text) return;
      const line = document.createElement("span");
      const row = printed && ROW.test(text);
      if (row) widest = Math.max(widest, text.length);
      line.className = row ? "mha-row" : "mha-line";
      const indent = text.length - text.trimStart().length;
      line.style.setProperty("--mha-indent", indent);
      // Where a phone draws the line's text (--mha-drawn): one level deeper than the line it is
      // inside, 4 characters at most, so a line aligned under a bracket 30 characters in still
      // reads as inside its statement, and a block as inside its block, with room to wrap.
      while (levels[levels.length - 1][0] > indent) levels.pop();
      const [outer, drawnOuter] = levels[levels.length - 1];
      const drawn = indent === outer ? drawnOuter : drawnOuter + Math.min(indent - outer, 4);
      if (indent > outer) levels.push([indent, drawn]);
      line.style.setProperty("--mha-drawn", drawn);
      line.append(...nodes);
      rebuilt.append(line);
    });
    pre.replaceChildren(rebuilt);
    if (widest) pre.style.setProperty("--mha-widest", widest);
  }

  function splitAll(root) {
    if (root.matches && root.matches(CODE)) split(root);
    root.querySelectorAll(CODE).forEach(split);
  }

  function start() {
    const article = document.querySelector("article.bd-article");
    if (!article) return;
    splitAll(article);
    new MutationObserver(function (mutations) {
      mutations.forEach(function (mutation) {
        mutation.addedNodes.forEach(function (node) {
          if (node.nodeType === Node.ELEMENT_NODE) splitAll(node);
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
