/* Run this page: the chapter's code cells, live in the web book.
 *
 * A chapter page carries <meta name="mha-live"> (written by _ext/live_code.py): where to get a
 * kernel (Binder from this repository's binder/ environment, or a Jupyter server set when the
 * book was built) and which notebook the page is. This script adds a "Run this page" button
 * beside the launch menu. Only when it is pressed does the page load thebe (the pinned npm
 * package, copied into _static/thebe/ by the build) and ask for a kernel; the cells then become
 * editors with Run buttons, and their outputs render as in JupyterLab.
 *
 * A cell whose code the book hides (a reveal, a solution) keeps it hidden: its Run button shows,
 * its code waits behind "Show the code", and what it prints hides its own answer in a closed
 * box, as in JupyterLab. The page's precomputed answer of that cell is not shown in live mode.
 * Any other cell keeps its precomputed output until it is run; what the static page keeps behind
 * a toggle (a mistakes gallery's feedback, tag hide-output) waits behind the same toggle once run,
 * and a figure's caption stays under the figure the cell draws.
 *
 * The editors wrap a long line as the static page does (_static/code-lines.css): a continuation
 * hangs 4 characters right of where its line's text starts, behind a "↪" drawn by CSS.
 * A guess committed in "Your guess" (_static/guess.js) is written into its prediction cell
 * (`prediction_x = <the guess>`), which then runs, so the reveal cell reads it. Restart asks
 * first, and says what it did.
 *
 * When no kernel comes within the stated time, or the server refuses, the page says so and
 * offers Colab and the notebook's download instead of a spinner.
 */
(function () {
  "use strict";

  const SCRIPT = document.currentScript ? document.currentScript.src : "";
  const HIDDEN_CODE = ".tag_reveal, .tag_solution, .tag_hide-cell, .tag_hide-input";
  const RUN_LABELS = {
    reveal: "Run: compute the answer",
    solution: "Run the solution",
  };

  function settings() {
    const meta = document.querySelector('meta[name="mha-live"]');
    if (!meta) return null;
    try {
      return JSON.parse(meta.content);
    } catch (error) {
      return null;
    }
  }

  function element(tag, className, text) {
    const node = document.createElement(tag);
    if (className) node.className = className;
    if (text) node.textContent = text;
    return node;
  }

  function minutes(seconds) {
    return seconds >= 120 ? `${Math.round(seconds / 60)} minutes` : `${seconds} seconds`;
  }

  function statusPanel(article) {
    let panel = article.querySelector(".mha-live-status");
    if (!panel) {
      panel = element("div", "mha-live-status");
      panel.setAttribute("role", "status");
      panel.setAttribute("aria-live", "polite");
      const title = article.querySelector("h1");
      if (title) title.after(panel);
      else article.prepend(panel);
    }
    return panel;
  }

  function say(panel, state, text) {
    panel.dataset.state = state;
    panel.replaceChildren(element("p", "", text));
  }

  /* No kernel: say so plainly, and point to the other ways to run the chapter. */
  function fallback(panel, config, reason) {
    say(panel, "failed", reason);
    const ways = element("p");
    const colab = document.querySelector(
      ".dropdown-launch-buttons a[href*='colab.research.google.com']",
    );
    const download = document.querySelector(".btn-download-source-button");
    const links = [];
    if (colab) links.push(["Open this chapter in Colab", colab.href]);
    if (download) links.push(["download the notebook", download.href]);
    ways.append("The page still reads as before, with its computed outputs. To run the chapter: ");
    links.forEach(([label, href], i) => {
      const link = element("a", "", label);
      link.href = href;
      if (i) ways.append(", or ");
      ways.append(link);
    });
    ways.append(" (it installs the book's package in its first cell).");
    panel.append(ways);
  }

  function loadThebe() {
    const base = new URL("thebe/", SCRIPT);
    const css = element("link");
    css.rel = "stylesheet";
    css.href = new URL("thebe.css", base).href;
    document.head.append(css);
    return new Promise((resolve, reject) => {
      const script = element("script");
      script.src = new URL("index.js", base).href;
      script.onload = () => resolve(window.thebe);
      script.onerror = () => reject(new Error("thebe did not load from this site"));
      document.head.append(script);
    });
  }

  /* A toggle like the static page's (myst-nb's hide-output): its words, with "Show"/"Hide". */
  function liveToggle(cell, content) {
    const words = cell.querySelector(":scope > details > summary");
    const show = words && words.querySelector(".collapsed");
    const hide = words && words.querySelector(".expanded");
    const toggle = element("details", "mha-code-toggle mha-live-toggle");
    const summary = element("summary");
    summary.append(
      element("span", "collapsed", show ? show.textContent : "Show the output"),
      element("span", "expanded", hide ? hide.textContent : "Hide the output"),
    );
    toggle.append(summary, content);
    // A box that hides its own content (mha.reveal.collapsed) opens with the toggle, as
    // _static/reveal.js opens it inside the static page's: one click shows it, not two.
    toggle.addEventListener("toggle", () => {
      if (!toggle.open) return;
      toggle.querySelectorAll("details.mha-hidden").forEach((box) => {
        box.open = true;
        box.classList.add("mha-opened-by-page");
      });
    });
    return toggle;
  }

  /* The caption of the figure a cell drew, for under its live output. */
  function liveCaption(cell) {
    const caption = cell.querySelector(".cell_output figure figcaption");
    if (!caption) return null;
    const copy = element("div", "mha-live-caption");
    copy.append(...caption.cloneNode(true).childNodes);
    copy.querySelectorAll(".headerlink").forEach((link) => link.remove());
    return copy;
  }

  /* Every code cell gets a source for thebe (its code as plain text) and an empty output area;
   * the cell's static parts stay until the cell runs (or, for hidden code, are set aside). */
  function prepareCells(article) {
    const cells = [];
    article.querySelectorAll(".cell").forEach((cell) => {
      const pre = cell.querySelector(".cell_input pre");
      if (!pre) return;
      const original = cell.cloneNode(true);
      const source = element("pre");
      source.setAttribute("data-mha-live-source", "");
      source.textContent = pre.textContent.replace(/\n$/, "");
      const output = element("div", "mha-live-output");
      output.setAttribute("data-mha-live-output", "");
      const hidden = cell.matches(HIDDEN_CODE);
      const statics = Array.from(cell.children);
      const onRun = [];
      if (hidden) {
        const code = element("details", "mha-code-toggle mha-live-code");
        const summary = element("summary");
        summary.innerHTML =
          '<span class="collapsed">Show the code</span>' +
          '<span class="expanded">Hide the code</span>';
        code.append(summary, source);
        const live = element("div", "mha-live-cell");
        live.append(output, code);
        statics.forEach((part) => (part.hidden = true));
        cell.append(live);
      } else {
        const input = pre.closest(".cell_input");
        input.replaceChildren(source);
        const shown = cell.matches(".tag_hide-output") ? liveToggle(cell, output) : output;
        const caption = liveCaption(cell);
        input.after(shown);
        if (caption) shown.after(caption);
        [shown, caption].forEach((part) => {
          if (part && part !== output) {
            part.hidden = true;
            onRun.push(part);
          }
        });
      }
      cell.classList.add("mha-live");
      cells.push({
        cell,
        original,
        hidden,
        onRun,
        statics: hidden ? [] : statics.filter((part) => !part.contains(source)),
      });
    });
    return cells;
  }

  /* thebe's buttons, in the book's words; a hidden cell's Run button moves out of its toggle. */
  function arrangeControls(cells) {
    cells.forEach(({ cell, hidden }) => {
      const box = cell.querySelector(".thebe-cell");
      const controls = box && box.querySelector(".thebe-controls");
      if (!controls) return;
      const kind = cell.matches(".tag_reveal") ? "reveal" : cell.matches(".tag_solution") ? "solution" : "";
      const labels = {
        run: [RUN_LABELS[kind] || "Run", "Run this cell (Shift+Enter in the code)"],
        runall: ["Run all", "Run every cell of the page, top to bottom"],
        restart: ["Restart", "Restart the kernel (forgets every variable)"],
      };
      Object.entries(labels).forEach(([slug, [text, title]]) => {
        const button = controls.querySelector(`.thebe-${slug}-button`);
        if (!button) return;
        button.textContent = text;
        button.title = title;
        button.type = "button";
      });
      if (hidden) cell.querySelector(".mha-live-cell").prepend(controls);
      confirmRestart(controls);
    });
  }

  /* Restart forgets every variable: it asks first (in the capture phase, before thebe's own
   * handler), and the status box says what happened. */
  function confirmRestart(controls) {
    controls.addEventListener(
      "click",
      (event) => {
        if (!event.target.closest(".thebe-restart-button")) return;
        const sure = window.confirm(
          "Restart the kernel? It forgets every variable: run the cells again from the top.",
        );
        const panel = document.querySelector(".mha-live-status");
        if (!sure) {
          event.stopPropagation();
          event.preventDefault();
          return;
        }
        if (panel) {
          say(
            panel,
            "ready",
            "Restarting the kernel: it forgets every variable. Once it is back, run the cells " +
              "again from the top, in order.",
          );
        }
      },
      true,
    );
  }

  /* Long lines wrap in the editor with a hanging indent: each line knows its indentation. */
  function wrapLikeThePage(cells) {
    cells.forEach(({ cell }) => {
      const wrapper = cell.querySelector(".CodeMirror");
      const editor = wrapper && wrapper.CodeMirror;
      if (!editor) return;
      editor.on("renderLine", (cm, line, node) => {
        const indent = line.text.length - line.text.trimStart().length;
        node.classList.add("mha-live-line");
        node.style.setProperty("--mha-indent", indent);
      });
      editor.refresh();
    });
  }

  /* The Python literal a verdict quotes ("Your prediction, 'B', matches the answer."): only a
   * str, a number, True, False or None, never code. */
  const VERDICT =
    /^Your prediction, ([\s\S]+), (?:matches the answer|is not what the code computes)\.$/;
  const LITERAL =
    /^(?:True|False|None|[-+]?[0-9]+(?:\.[0-9]+)?|'(?:[^'\\\n]|\\.)*'|"(?:[^"\\\n]|\\.)*")$/;
  const ASSIGNMENT = /^(prediction\w*)\s*=.*$/m;

  /* "Your guess" into the kernel: a committed guess replaces its prediction cell's value, and the
   * cell runs, so the reveal cell below reads it (and Run all keeps it). */
  function guessesIntoKernel(article, cells) {
    article.querySelectorAll("fieldset.mha-guess").forEach((group) => {
      const reveal = cells.find(({ cell }) => cell === group.nextElementSibling);
      const before = cells.filter(
        ({ cell }) =>
          cell.matches(".tag_prediction") &&
          cell.compareDocumentPosition(group) & Node.DOCUMENT_POSITION_FOLLOWING,
      );
      const prediction = before[before.length - 1];
      const verdict = group.querySelector(".mha-guess-verdict");
      if (!reveal || !prediction || !verdict) return;
      const editor = prediction.cell.querySelector(".CodeMirror").CodeMirror;
      const code = reveal.cell.querySelector(".CodeMirror").CodeMirror;
      const apply = () => {
        if (!verdict.matches(".mha-guess-right, .mha-guess-wrong")) return;
        const quoted = VERDICT.exec(verdict.textContent.trim());
        const source = editor.getValue();
        const name = ASSIGNMENT.exec(source);
        if (!quoted || !LITERAL.test(quoted[1]) || !name) return;
        if (!new RegExp(`\\b${name[1]}\\b`).test(code.getValue())) return;
        const line = `${name[1]} = ${quoted[1]}  # your guess, from "Your guess"`;
        const updated = source.replace(ASSIGNMENT, line);
        if (updated === source) return;
        editor.setValue(updated);
        prediction.cell.querySelector(".thebe-run-button").click();
      };
      new MutationObserver(apply).observe(verdict, {
        attributes: true,
        childList: true,
        characterData: true,
        subtree: true,
      });
      apply();
    });
  }

  function hideStaticOutputOnRun(thebe, cells) {
    thebe.on("status", (event, data) => {
      if (!data || data.subject !== "cell" || data.status !== "executing") return;
      const box = document.querySelector(`[data-thebe-id="${data.id}"]`);
      const entry = box && cells.find(({ cell }) => cell.contains(box));
      if (!entry) return;
      entry.statics.forEach((part) => {
        if (!part.classList.contains("cell_input")) part.hidden = true;
      });
      entry.onRun.forEach((part) => (part.hidden = false));
    });
  }

  function thebeOptions(config) {
    const options = {
      requestKernel: true,
      mountActivateWidget: false,
      mountStatusWidget: false,
      mountRestartAllButton: false,
      selector: "[data-mha-live-source]",
      outputSelector: "[data-mha-live-output]",
      kernelOptions: { kernelName: "python3", path: config.notebook },
      // No MathJax from a CDN: the book's outputs hold no LaTeX (it would show as its text).
      mathjaxUrl: "",
      // Long lines wrap (with a hanging indent: wrapLikeThePage), as on the static page.
      codeMirrorConfig: { lineWrapping: true },
    };
    if (config.server) {
      options.useBinder = false;
      options.serverSettings = {
        baseUrl: config.server.url,
        token: config.server.token,
        appendToken: true,
      };
    } else {
      options.useBinder = true;
      options.binderOptions = {
        binderUrl: config.binder.url,
        repo: config.binder.repo,
        ref: config.binder.ref,
        repoProvider: "github",
      };
    }
    return options;
  }

  async function start(config, button) {
    const article = document.querySelector("article.bd-article");
    const panel = statusPanel(article);
    button.disabled = true;
    const where = config.server
      ? `the Jupyter server at ${config.server.url}`
      : `Binder (${config.binder.url}), from this book's repository`;
    say(
      panel,
      "starting",
      `Starting a kernel on ${where}. This can take a while; if none comes within ` +
        `${minutes(config.timeout)}, this box says so.`,
    );
    let timer;
    const timeout = new Promise((resolve, reject) => {
      timer = setTimeout(
        () => reject(new Error(`No kernel came within ${minutes(config.timeout)}.`)),
        config.timeout * 1000,
      );
    });
    let cells = [];
    try {
      const thebe = await Promise.race([loadThebe(), timeout]);
      cells = prepareCells(article);
      const progress = element("p", "mha-live-progress");
      panel.append(progress);
      thebe.on("status", (event, data) => {
        if (data && data.subject === "server" && data.message) {
          progress.textContent = `Now: ${data.message}`;
        }
      });
      const failed = new Promise((resolve, reject) => {
        thebe.on("error", (event, data) => {
          if (data && data.subject !== "cell") {
            reject(new Error(`No kernel: ${data.message || data.status}.`));
          }
        });
      });
      const running = thebe.bootstrap(thebeOptions(config));
      arrangeControls(cells);
      wrapLikeThePage(cells);
      hideStaticOutputOnRun(thebe, cells);
      const { session } = await Promise.race([running, timeout, failed]);
      if (!session) throw new Error("The server gave no kernel.");
      clearTimeout(timer);
      article.classList.add("mha-live-ready");
      say(
        panel,
        "ready",
        "Kernel ready: the code cells are editable. Run them from the top, in order " +
          "(each cell's Run button, or Shift+Enter in its code).",
      );
      guessesIntoKernel(article, cells);
      button.setAttribute("aria-label", "Page is live");
      button.textContent = "Live";
    } catch (error) {
      clearTimeout(timer);
      cells.forEach(({ cell, original }) => cell.replaceWith(original));
      const more = config.server
        ? "The Jupyter server did not answer: is it running, and does it allow this " +
          `page's origin (${location.origin}: its ServerApp.allow_origin)?`
        : "Binder may be full or down.";
      fallback(panel, config, `${error.message} ${more}`);
      button.setAttribute("aria-label", "No kernel");
      button.textContent = "No kernel";
    }
  }

  function addButton() {
    const config = settings();
    const header = document.querySelector(".article-header-buttons");
    const article = document.querySelector("article.bd-article");
    if (!config || !header || !article || !article.querySelector(".cell .cell_input pre")) return;
    const button = element("button", "btn btn-sm mha-live-button");
    button.type = "button";
    // A phone shows "Run" (CSS hides the rest from sight, not from a screen reader): the
    // button's name is its own text, "Run this page", everywhere.
    button.innerHTML =
      '<i class="fas fa-play" aria-hidden="true"></i>' +
      '<span>Run <span class="mha-live-more">this page</span></span>';
    header.prepend(button);
    button.addEventListener("click", () => start(config, button), { once: true });
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", addButton);
  } else {
    addButton();
  }
})();
