/* "Your guess": commit a guess in the page, for every prediction.
 *
 * A reveal box (mha.reveal.reveal) carries base64-encoded JSON from mha.reveal.guess_data in the
 * data-mha-guess attribute of a hidden element inside its closed content (out of plain view in
 * the source, and out of the search index). From it, before the cell's "Reveal the answer"
 * toggle, a group named "Your guess": a button per choice (with the verdict Python gives it),
 * or a text box and "Check my guess" for a number or numbers, read here in mha.predictions's
 * grammar, rule for rule (tests/prediction_cases.json holds both readers to the same cases).
 * The labels of a choice are read here by the same rules too ("(B)", "yes", "4 offsets"),
 * so that the table holds every form a reader writes to both readers.
 * A guess shows Python's verdict word for word and, once it could be read, opens the answer.
 * Guesses stay in this browser (localStorage, one entry per page: no cookie, no request); the
 * chapter ends with a tally and a button that clears it. JupyterLab, Binder and Colab never run
 * this file: they keep the Python route (the prediction cell, then the reveal cell).
 */
(function () {
  "use strict";

  class Unreadable extends Error {}

  /* mha.prediction_numbers._NUMERAL, _FACTOR; mha.prediction_sequences._TOKEN */
  const NUMERAL = String.raw`(?:[0-9]{1,3}(?:[,_' \u00a0\u202f][0-9]{3})+|[0-9]+)(?:\.[0-9]*)?`;
  const FACTOR = new RegExp(String.raw`^([+-]?)(${NUMERAL})(?:\s*\^\s*(${NUMERAL}))?$`);
  const TOKEN =
    /\s*(?:([0-9]+(?:\.[0-9]+)?)|([()[\]])|(,|;|\/|×|\*|x|by|and|(?:torch\.)?size))\s*/y;
  const LARGEST = 2 ** 53;
  /* mha.prediction_numbers._UNIT, _NOT_A_UNIT: a number, then up to three words, its unit */
  const UNIT = /^(.*?[0-9])\s+([a-z][a-z'-]*(?:\s+[a-z][a-z'-]*){0,2})$/i;
  const NOT_A_UNIT = new RegExp(
    "^(?:hundred|thousand|million|billion|trillion|dozen|lakh|crore|k|m|g|t|bn|mn|mil|" +
      String.raw`[kmgtp]i?b|(?:kilo|mega|giga|tera|peta|kibi|mebi|gibi|tebi)\w*|squared|cubed|` +
      "percent|or|and|nor|not|plus|minus|than|less|more|fewer|over|under|above|below|least|" +
      String.raw`most|at|max|min|about|around|roughly|approx\w*|circa|ish|so|nearly|almost|` +
      "maybe|perhaps)s?$",
    "i",
  );
  /* mha.prediction_labels._BEFORE, _AFTER, _HEDGE: what may stand around a choice's label */
  const BEFORE = String.raw`^(?:(?:option|choice|answer)\s*:?\s*)?[(\[]?\s*`;
  const AFTER =
    String.raw`\s*[)\]]?\s*[.:!?]?` +
    String.raw`(?:(?:\s*[(\[]|\s*[:,;=\u2013\u2014-]|(?<=[.):!?\]])\s)(.*))?$`;
  const HEDGE = /^(?:(?:or|and|nor|vs)\b|[/&|])/i;
  /* mha.gqa._LIST_BREAK: what separates two lists written without brackets */
  const LIST_BREAK = /\s*(?:\/|;|\||\n|\band\b|\bvs\.?)\s*/;

  /* mha.prediction_values._tidy: no spaces, quotes or backticks around, no final full stop */
  const tidy = (text) => text.replace(/^[\s`'"]+|[\s`'".]+$/g, "");
  const numeral = (text) => Number(text.replace(/[,_' \u00a0\u202f]/g, ""));

  /* mha.prediction_numbers._without_unit: the text without the words naming its number's unit */
  function withoutUnit(text) {
    const found = UNIT.exec(text);
    if (!found || found[2].split(/\s+/).some((word) => NOT_A_UNIT.test(word))) return text;
    return found[1];
  }

  /* mha.prediction_numbers._number_text: the number typed, or Unreadable */
  function numberText(text) {
    const named = tidy(text).replace(/^[A-Za-z_][A-Za-z0-9_]*\s*=\s*/, "");
    const said = withoutUnit(named).replace(/\*\*/g, "^");
    let value = 1;
    for (const factor of said.split(/\s*[*×]\s*/)) {
      const found = FACTOR.exec(factor);
      if (!found) throw new Unreadable();
      let base = numeral(found[2]);
      if (found[3] !== undefined) {
        const power = numeral(found[3]);
        if (!Number.isInteger(power) || power > 64) throw new Unreadable();
        base = base ** power;
      }
      value *= found[1] === "-" ? -base : base;
    }
    if (!(Math.abs(value) <= LARGEST)) throw new Unreadable();
    return value;
  }

  /* mha.prediction_sequences._sequence_text: the numerals typed, as nested arrays of text */
  function sequenceText(text) {
    const said = tidy(text).toLowerCase();
    const stack = [[]];
    let at = 0;
    while (at < said.length) {
      TOKEN.lastIndex = at;
      const found = TOKEN.exec(said);
      if (!found || TOKEN.lastIndex === at) throw new Unreadable();
      at = TOKEN.lastIndex;
      const [, numeralText, bracket] = found;
      if (numeralText !== undefined) stack[stack.length - 1].push(numeralText);
      else if (bracket === "(" || bracket === "[") stack.push([]);
      else if (bracket) {
        if (stack.length === 1) throw new Unreadable();
        const inner = stack.pop();
        stack[stack.length - 1].push(inner);
      }
    }
    if (stack.length !== 1) throw new Unreadable();
    let top = stack[0];
    while (top.length === 1 && Array.isArray(top[0])) top = top[0];
    return top;
  }

  const nested = (typed) => (Array.isArray(typed) ? typed.map(nested) : sequenceText(typed));
  const leaves = (value) => (Array.isArray(value) ? value.flatMap(leaves) : [value]);

  /* mha.prediction_sequences._judge */
  function judge(said, answer) {
    if (!Array.isArray(answer)) {
      if (Array.isArray(said)) throw new Unreadable();
      return numeral(said) === answer;
    }
    if (!Array.isArray(said)) throw new Unreadable();
    let flat = leaves(said);
    const wanted = leaves(answer);
    if (!flat.length) throw new Unreadable();
    const oneDigit = wanted.every((a) => Number.isInteger(a) && a >= 0 && a <= 9);
    const runs = flat.every((leaf) => /^[0-9]+$/.test(leaf)) && flat.join("");
    if (flat.length !== wanted.length && oneDigit && runs && runs.length === wanted.length) {
      flat = Array.from(runs); // runs of digits, read digit by digit
    }
    if (flat.length === wanted.length) return flat.every((leaf, i) => numeral(leaf) === wanted[i]);
    if (said.length !== answer.length) {
      const kind = answer.length ? Array.isArray(answer[0]) : false;
      if (said.every((item) => Array.isArray(item) === kind)) return false;
      throw new Unreadable();
    }
    return said.every((item, i) => judge(item, answer[i]));
  }

  /* --- A choice's label (mha.prediction_labels._label) ---------------------------------- */

  const isNumber = (value) => typeof value === "number";
  const escape = (text) => text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
  /* mha.prediction_labels._spellings: Python's str() of a label; yes or no for True or False */
  const spellings = (label) =>
    typeof label === "boolean" ? (label ? ["True", "yes"] : ["False", "no"]) : [String(label)];

  /* mha.prediction_labels._names_another */
  function namesAnother(text, label, pairs) {
    const rest = tidy(text).replace(/^[()[\] ]+|[()[\] ]+$/g, "");
    const first = rest.split(/[\s,;:.)\]]+/)[0];
    const others = pairs.filter(([other]) => other !== label).flatMap(([o]) => spellings(o));
    return (
      HEDGE.test(rest) ||
      (pairs.some(([other]) => isNumber(other)) && /^[+-]?[0-9]/.test(rest)) ||
      others.some((spelt) =>
        /^[A-Z]$/.test(spelt) ? first === spelt : first.toLowerCase() === spelt.toLowerCase(),
      )
    );
  }

  /* mha.prediction_labels._own_text */
  const ownText = (text, label, pairs) =>
    pairs.some(
      ([other, words]) =>
        other === label &&
        typeof words === "string" &&
        tidy(text).toLowerCase() === tidy(words).toLowerCase(),
    );

  /* mha.prediction_labels._label: the label typed, or Unreadable.
   * ``pairs``: [label, text or null] */
  function labelOf(typed, pairs) {
    const said = tidy(typed);
    const named = pairs.filter(([label]) => ownText(said, label, pairs)).map(([label]) => label);
    for (const [label] of pairs) {
      if (isNumber(label)) {
        try {
          if (numberText(said) === label) named.push(label);
        } catch (error) {
          if (!(error instanceof Unreadable)) throw error;
        }
      }
      const spelt = spellings(label).map(escape).join("|");
      let found = new RegExp(`${BEFORE}(?:${spelt})${AFTER}`, "i").exec(said);
      if (found && !(found[1] && namesAnother(found[1], label, pairs))) named.push(label);
      found = new RegExp(String.raw`${BEFORE}(?:${spelt})\s+(.*)$`, "i").exec(said);
      if (found && ownText(found[1], label, pairs)) named.push(label);
    }
    if (new Set(named.map(String)).size !== 1) throw new Unreadable();
    return named[0];
  }

  /* A question's choices, as JSON holds them, as [label, text or null] pairs: a dict of label
   * to text, a list of offered answers, or a list of [label, text] pairs (labels JSON cannot
   * key a dict by, True and False). */
  function choicePairs(choices) {
    if (!Array.isArray(choices)) return Object.entries(choices);
    return choices.map((choice) => (Array.isArray(choice) ? choice : [choice, null]));
  }

  /* mha.predictions.read, for typed text: an answer of numbers, or a label */
  function readAs(typed, answer, choices) {
    if (choices || typeof answer === "boolean" || typeof answer === "string") {
      const pairs = choices
        ? choicePairs(choices)
        : typeof answer === "boolean"
          ? [[true, null], [false, null]]
          : [[answer, null]];
      try {
        return labelOf(typed, pairs) === answer;
      } catch (error) {
        if (choices || typeof answer !== "string") throw error;
        return false; // a label, with no other label known: naming another is wrong
      }
    }
    if (!Array.isArray(answer)) return numberText(typed) === answer;
    return judge(nested(typed), answer);
  }

  /* mha.gqa.block_lists_match: two lists of block numbers, counted from 1 or from 0 */
  function blockLists(typed, answer) {
    let said = typed;
    if (!/[[\]()]/.test(typed)) {
      const parts = typed.trim().split(LIST_BREAK).filter(Boolean);
      if (parts.length > 1) said = parts;
    }
    const fromZero = answer.map((blocks) => blocks.map((block) => block - 1));
    const verdicts = [];
    for (const convention of [answer, fromZero]) {
      try {
        verdicts.push(readAs(said, convention));
      } catch (error) {
        if (!(error instanceof Unreadable)) throw error;
      }
    }
    if (!verdicts.length) throw new Unreadable();
    return verdicts.some(Boolean);
  }

  const READERS = { default: readAs, block_lists: blockLists };

  /* "right", "wrong" or "unreadable": how mha.predictions reads the typed ``text``. */
  function readGuess(text, answer, reader, choices) {
    try {
      return READERS[reader || "default"](text, answer, choices) ? "right" : "wrong";
    } catch (error) {
      if (error instanceof Unreadable) return "unreadable";
      throw error;
    }
  }

  /* Python's repr() of a str, as the verdict quotes the prediction. */
  function pythonRepr(text) {
    const quote = text.includes("'") && !text.includes('"') ? '"' : "'";
    let out = "";
    for (const ch of text) {
      if (ch === "\\") out += "\\\\";
      else if (ch === quote) out += "\\" + quote;
      else if (ch === "\n") out += "\\n";
      else if (ch === "\r") out += "\\r";
      else if (ch === "\t") out += "\\t";
      else if (ch === " " || !/[\p{C}\p{Z}]/u.test(ch)) out += ch;
      else {
        const code = ch.codePointAt(0); // not printable: escaped as Python escapes it
        const [prefix, width] = code < 0x100 ? ["x", 2] : code < 0x10000 ? ["u", 4] : ["U", 8];
        out += "\\" + prefix + code.toString(16).padStart(width, "0");
      }
    }
    return quote + out + quote;
  }

  /* The verdict mha.reveal gives a typed prediction, word for word. */
  function verdictOf(text, data) {
    const outcome = readGuess(text, data.answer, data.reader, data.choices);
    const said = {
      right: "matches the answer",
      wrong: "is not what the code computes",
      unreadable: `cannot be read as this answer: write it as ${data.format}`,
    }[outcome];
    return { outcome, verdict: `Your prediction, ${pythonRepr(text)}, ${said}.` };
  }

  /* --- The page: controls, storage, tally ----------------------------------------------- */

  const STORE = "mha-guesses:" + location.pathname;

  function loadGuesses() {
    try {
      return JSON.parse(localStorage.getItem(STORE)) || {};
    } catch (error) {
      return {};
    }
  }

  function saveGuesses(guesses) {
    try {
      if (Object.keys(guesses).length) localStorage.setItem(STORE, JSON.stringify(guesses));
      else localStorage.removeItem(STORE);
    } catch (error) {
      /* storage refused (private mode, full): the verdict still shows */
    }
  }

  function decode(encoded) {
    const bytes = Uint8Array.from(atob(encoded), (c) => c.charCodeAt(0));
    return JSON.parse(new TextDecoder().decode(bytes));
  }

  /* A short, stable id for a question: its place on the page and its payload. */
  function questionId(place, encoded) {
    let hash = 0;
    for (let i = 0; i < encoded.length; i++) hash = (hash * 31 + encoded.charCodeAt(i)) | 0;
    return `${place}-${(hash >>> 0).toString(36)}`;
  }

  function element(tag, className, text) {
    const node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined) node.textContent = text;
    return node;
  }

  const questions = [];
  let tally = null;

  function openAnswer(cell) {
    const toggle = cell.querySelector(":scope > details");
    if (toggle) toggle.open = true;
    cell.querySelectorAll("details.mha-hidden").forEach((box) => (box.open = true));
  }

  function show(question, record) {
    const { verdict, controls } = question;
    verdict.textContent = record ? record.verdict : "";
    verdict.className = "mha-guess-verdict" + (record ? ` mha-guess-${record.outcome}` : "");
    const settled = Boolean(record) && record.outcome !== "unreadable";
    controls.forEach((control) => {
      control.disabled = settled;
      if (control.dataset.guess !== undefined) {
        control.setAttribute(
          "aria-pressed",
          String(settled && control.dataset.guess === record.guess),
        );
      }
    });
    if (question.input) {
      question.input.disabled = settled;
      if (!record) question.input.value = "";
      else if (settled) question.input.value = record.guess;
    }
  }

  function commit(question, guess, outcome, verdict) {
    const record = { guess, outcome, verdict };
    show(question, record);
    if (outcome === "unreadable") return; // not yet a guess: the reader writes it again
    const guesses = loadGuesses();
    guesses[question.id] = record;
    saveGuesses(guesses);
    openAnswer(question.cell);
    updateTally();
  }

  // The heading of the question a reveal cell answers, as toggle-names.js names its toggle.
  function questionTitle(cell) {
    const headings = document.querySelectorAll("article.bd-article :is(h1, h2, h3, h4)");
    const above = Array.from(headings).filter(
      (heading) => heading.compareDocumentPosition(cell) & Node.DOCUMENT_POSITION_FOLLOWING,
    );
    if (!above.length) return "";
    const copy = above[above.length - 1].cloneNode(true);
    copy.querySelectorAll(".headerlink").forEach((link) => link.remove());
    return copy.textContent.trim().replace(/\s+/g, " ");
  }

  function buildGroup(data, id, cell) {
    const group = element("fieldset", "mha-guess");
    group.append(element("legend", "", "Your guess"));
    // Named for its question too: a screen reader then tells one question's "A. the same" from
    // another's (the legend alone named every group of a page alike).
    const title = questionTitle(cell);
    if (title) group.setAttribute("aria-label", `Your guess: ${title}`);
    const verdict = element("p", "mha-guess-verdict");
    verdict.setAttribute("role", "status");
    const question = { id, cell, verdict, controls: [], input: null };
    if (data.choices) {
      const list = element("div", "mha-guess-choices");
      data.choices.forEach((choice) => {
        const button = element("button", "mha-guess-choice", choice.label);
        button.type = "button";
        button.dataset.guess = choice.label;
        button.setAttribute("aria-pressed", "false");
        button.addEventListener("click", () =>
          commit(question, choice.label, choice.right ? "right" : "wrong", choice.verdict),
        );
        list.append(button);
        question.controls.push(button);
      });
      group.append(list);
    } else {
      const typed = element("div", "mha-guess-typed");
      const input = element("input", "mha-guess-input");
      input.type = "text";
      input.id = `mha-guess-${id}`;
      input.autocomplete = "off";
      input.spellcheck = false;
      input.setAttribute("autocapitalize", "off");
      const label = element("label", "", "Type your guess");
      label.htmlFor = input.id;
      const form = element("p", "mha-guess-format", `Write it as ${data.format}.`);
      form.id = `${input.id}-format`;
      input.setAttribute("aria-describedby", form.id);
      const check = element("button", "mha-guess-check", "Check my guess");
      check.type = "button";
      const submit = () => {
        const text = input.value;
        if (!text.trim()) {
          show(question, {
            guess: text,
            outcome: "unreadable",
            verdict: `Type a guess first: write it as ${data.format}.`,
          });
          return;
        }
        const { outcome, verdict: words } = verdictOf(text, data);
        commit(question, text, outcome, words);
      };
      check.addEventListener("click", submit);
      input.addEventListener("keydown", (event) => {
        if (event.key === "Enter") {
          event.preventDefault();
          submit();
        }
      });
      typed.append(label, form, input, check);
      group.append(typed);
      question.controls.push(check);
      question.input = input;
    }
    group.append(verdict);
    questions.push(question);
    return group;
  }

  function updateTally() {
    if (!tally) return;
    const guesses = loadGuesses();
    const records = questions.map((q) => guesses[q.id]).filter(Boolean);
    const right = records.filter((r) => r.outcome === "right").length;
    const open = questions.length - records.length;
    tally.count.textContent = `Predictions: ${right} of ${questions.length} right`;
    tally.open.textContent = open ? ` (${open} not guessed yet)` : "";
    tally.clear.disabled = records.length === 0;
  }

  function buildTally(article) {
    const section = element("section", "mha-guess-tally");
    section.setAttribute("aria-label", "Your predictions");
    const line = element("p", "mha-guess-tally-line");
    line.setAttribute("role", "status");
    const count = element("span", "mha-guess-tally-count");
    const open = element("span", "mha-guess-tally-open");
    line.append(count, open);
    const note = element(
      "p",
      "mha-guess-tally-note",
      "Your guesses stay in this browser, for this chapter only.",
    );
    const clear = element("button", "mha-guess-clear", "Clear my guesses");
    clear.type = "button";
    clear.addEventListener("click", () => {
      saveGuesses({});
      questions.forEach((q) => show(q, null));
      updateTally();
    });
    section.append(line, note, clear);
    article.append(section);
    tally = { count, open, clear };
  }

  function run() {
    const article = document.querySelector("article.bd-article");
    if (!article) return;
    let place = 0;
    article.querySelectorAll(".cell.tag_reveal").forEach((cell) => {
      const holder = cell.querySelector("[data-mha-guess]");
      if (!holder) return;
      let data;
      try {
        data = decode(holder.dataset.mhaGuess);
      } catch (error) {
        return;
      }
      const id = questionId(place++, holder.dataset.mhaGuess);
      cell.before(buildGroup(data, id, cell));
    });
    if (!questions.length) return;
    buildTally(article);
    const guesses = loadGuesses();
    questions.forEach((q) => show(q, guesses[q.id] || null));
    updateTally();
  }

  /* For tests/browser/test_guesses.py: the reader, held to tests/prediction_cases.json. */
  window.mhaGuess = { readGuess, verdictOf };

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", run);
  } else {
    run();
  }
})();
