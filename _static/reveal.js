/* Predict, then reveal, for readers of the web book.
 *
 * A reveal cell (tags reveal + hide-cell) arrives as one toggle, "Reveal the answer", holding the
 * code and then its output. A web reader wants the answer first: here the answer box that
 * mha.reveal.reveal() draws moves to the top of the output, and the code that computed it moves
 * below, behind a second toggle, "Show the code". Without JavaScript the page still hides the
 * whole cell behind its first toggle, code first.
 *
 * Every box the reader must ask for (an answer, a hint, a solution, a mistakes gallery's
 * feedback) also hides its own content, in a closed <details class="mha-hidden">, for renderers
 * that ignore the notebook's tags (Colab). Inside one of this page's toggles that would ask for
 * a second click: such a box is opened here, and _static/toggles.css drops its summary, so the
 * page's toggle alone shows it. A box outside every toggle keeps its own.
 */
(function () {
  function answerFirst(details) {
    const input = details.querySelector(":scope > .cell_input");
    const output = details.querySelector(":scope > .cell_output");
    if (!input || !output) return;
    const box = output.querySelector(".mha-reveal");
    const boxOutput = box && box.closest(".cell_output > *");
    if (boxOutput) output.prepend(boxOutput);

    const code = document.createElement("details");
    code.className = "mha-code-toggle";
    const summary = document.createElement("summary");
    summary.innerHTML =
      '<span class="collapsed">Show the code that computed it</span>' +
      '<span class="expanded">Hide the code</span>';
    code.append(summary, input);
    output.after(code);
    details.classList.add("mha-answer-first");
  }

  function openInsidePageToggle(box) {
    if (!box.parentElement.closest("details")) return;
    box.open = true;
    box.classList.add("mha-opened-by-page");
  }

  function run() {
    document
      .querySelectorAll("article .cell.tag_reveal > details")
      .forEach(answerFirst);
    document
      .querySelectorAll("article details.mha-hidden")
      .forEach(openInsidePageToggle);
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", run);
  } else {
    run();
  }
})();
