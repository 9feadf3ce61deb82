/* Predict, then reveal, for readers of the web book.
 *
 * A reveal cell (tags reveal + hide-cell) arrives as one toggle, "Reveal the answer", holding the
 * code and then its output. A web reader wants the answer first: here the answer box that
 * mha.reveal.reveal() draws moves to the top of the output, and the code that computed it moves
 * below, behind a second toggle, "Show the code". Without JavaScript the page still hides the
 * whole cell behind its first toggle, code first.
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

  function run() {
    document
      .querySelectorAll("article .cell.tag_reveal > details")
      .forEach(answerFirst);
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", run);
  } else {
    run();
  }
})();
