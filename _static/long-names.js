/* A dotted name too long for a phone's line may break before one of its dots, and nowhere else.
 *
 * Inline code keeps each word whole (_static/long-names.css). A word with dots that is longer
 * than LONG characters (torch.nn.functional.scaled_dot_product_attention), or that stands in a
 * heading, whose large type makes even nn.MultiheadAttention wider than a phone, is split here
 * into whole pieces, each starting at a dot, with a break opportunity (<wbr>) between them.
 * Shorter names and commands (python -m mha.bench) stay whole. Copying copies the name unchanged.
 */
(function () {
  const LONG = 30;

  function splitAtDots(word) {
    const text = word.textContent;
    const long = text.length > LONG || word.closest("h1, h2, h3, h4, h5, h6");
    if (!long || !text.includes(".", 1)) return;
    const pieces = text.split(/(?=\.)/);
    word.textContent = "";
    pieces.forEach(function (piece, i) {
      if (i > 0) word.append(document.createElement("wbr"));
      const part = document.createElement("span");
      part.className = "pre";
      part.textContent = piece;
      word.append(part);
    });
    word.classList.remove("pre");
    word.classList.add("mha-long-name");
  }

  function run() {
    document
      .querySelectorAll("article.bd-article code.literal span.pre")
      .forEach(splitAtDots);
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", run);
  } else {
    run();
  }
})();
