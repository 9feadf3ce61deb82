/* Commit a guess in the page, for every prediction.
 *
 * A reveal cell's answer box (mha.reveal.reveal) carries, in the data-mha-guess attribute of an
 * empty hidden element inside its closed content, base64-encoded JSON from mha.reveal.guess_data:
 * either the question's choices, each with the verdict Python gives it, or a typed answer's
 * value, the reader to use and the format to show for a guess that cannot be read. (Base64 keeps
 * the answer out of plain view of anyone skimming the page source; the search index holds only
 * text, never attributes.) From it, here, before the cell's "Reveal the answer" toggle, a group
 * of controls named "Your guess": a button per choice, or a text box and "Check my guess".
 *
 * Committing a guess shows the verdict in Python's words ("matches the answer", "is not what the
 * code computes", or the format to write it in), and, once the guess could be read, opens the
 * answer. Guesses stay in this browser (localStorage, one entry per chapter page: no cookie, no
 * request); the chapter ends with a tally and a button that clears it. The toggle still opens
 * the answer for a reader who does not guess. JupyterLab, Binder and Colab never run this file:
 * they keep the Python route (the prediction cell, then the reveal cell).
 *
 * readGuess is the twin of mha.predictions.read for typed numbers and sequences of numbers
 * (and of mha.gqa.block_lists_match): tests/prediction_cases.json holds both to the same cases.
 */
(function () {
  "use strict";

  class Unreadable extends Error {}

  const NUMBER_WORDS = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen " +
    "fourteen fifteen sixteen seventeen eighteen nineteen twenty"
  ).split(" ");
  const GROUPED = /^[+-]?\d{1,3}(?<sep>[, '_])\d{3}(?:\k<sep>\d{3})*(?:\.\d+)?$/;
  const BEFORE_NUMBER = /^(?:[a-z_][\w.]*\s*=|all\s)\s*(.+)$/;
  const UNIT_AFTER_NUMBER = /^(.+?)\s+([a-z][a-z_ -]*)$/;
  const NOT_UNITS = new Set(
    NUMBER_WORDS.concat(["hundred", "thousand", "million", "billion", "not", "or"]),
  );
  const TOKEN = /[()[\]]|[^()[\],;/&|\s]+/g;
  const JOINING_WORDS = new Set(["and", "by", "x", "×", "*", "-", "then", "vs", "vs."]);
  const JOINED_NUMBERS = /^\d+(?:[x×*-]\d+)+$/;
  const NAME_WORD = /^[a-z_]+[:=]?$/;
  const HEDGES = new Set(["not", "no", "or", "maybe"]);
  const LIST_BREAK = /\s*(?:\/|;|\||\n|\band\b|\bvs\.?)\s*/;
  const QUOTES = "`'\"“”‘’ ";

  function stripChars(text, chars) {
    let start = 0;
    let end = text.length;
    while (start < end && chars.includes(text[start])) start++;
    while (end > start && chars.includes(text[end - 1])) end--;
    return text.slice(start, end);
  }

  /* mha.predictions._said: no case, no runs of spaces, no quotes around, no final . or ! */
  function said(text) {
    let out = String(text).split(/\s+/).filter(Boolean).join(" ").toLowerCase();
    let previous = null;
    while (out !== previous) {
      previous = out;
      out = stripChars(out, QUOTES).replace(/[.!]+$/, "").trim();
    }
    return out;
  }

  /* A small arithmetic expression, as mha.predictions._evaluate reads Python's: + - * / // **
   * and brackets, powers kept small. */
  function evaluate(text) {
    const tokens = [];
    const pattern =
      /\s*(?:(\d+(?:_\d+)*(?:\.(?:\d+(?:_\d+)*)?)?(?:e[+-]?\d+(?:_\d+)*)?|\.\d+(?:e[+-]?\d+(?:_\d+)*)?)|(\*\*|\/\/|[-+*/()]))/y;
    let at = 0;
    while (at < text.length) {
      if (/^\s+$/.test(text.slice(at))) break;
      pattern.lastIndex = at;
      const match = pattern.exec(text);
      if (!match) throw new Unreadable();
      if (match[1] !== undefined) {
        const literal = match[1];
        if (/^0\d*[1-9]/.test(literal) && !/[.e]/.test(literal)) throw new Unreadable();
        tokens.push({ number: Number(literal.replace(/_/g, "")) });
      } else {
        tokens.push({ op: match[2] });
      }
      at = pattern.lastIndex;
    }
    let i = 0;
    const peek = () => tokens[i] && tokens[i].op;
    function atom() {
      const token = tokens[i++];
      if (!token) throw new Unreadable();
      if (token.number !== undefined) return token.number;
      if (token.op === "(") {
        const value = sum();
        if (peek() !== ")") throw new Unreadable();
        i++;
        return value;
      }
      throw new Unreadable();
    }
    function power() {
      const left = atom();
      if (peek() !== "**") return left;
      i++;
      const right = unary();
      if (Math.abs(right) > 64 || Math.abs(left) > 2 ** 20) throw new Unreadable();
      if (left === 0 && right < 0) throw new Unreadable();
      return left ** right;
    }
    function unary() {
      if (peek() === "-" || peek() === "+") {
        const sign = tokens[i++].op === "-" ? -1 : 1;
        return sign * unary();
      }
      return power();
    }
    function product() {
      let value = unary();
      while (["*", "/", "//"].includes(peek())) {
        const op = tokens[i++].op;
        const right = unary();
        if (op === "*") value *= right;
        else if (right === 0) throw new Unreadable();
        else value = op === "/" ? value / right : Math.floor(value / right);
      }
      return value;
    }
    function sum() {
      let value = product();
      while (peek() === "+" || peek() === "-") {
        const op = tokens[i++].op;
        value = op === "+" ? value + product() : value - product();
      }
      return value;
    }
    if (!tokens.length) throw new Unreadable();
    const value = sum();
    if (i !== tokens.length) throw new Unreadable();
    return value;
  }

  function bareNumber(text) {
    const index = NUMBER_WORDS.indexOf(text);
    if (index >= 0) return index;
    if (GROUPED.test(text)) text = text.replace(/[, '_]/g, "");
    else if (/^[+-]?\d{1,3}(?:\.\d{3}){2,}$/.test(text)) text = text.replace(/\./g, "");
    if (text.length > 100) throw new Unreadable();
    return evaluate(text.replace(/\^/g, "**").replace(/×/g, "*"));
  }

  /* mha.predictions._number */
  function number(prediction) {
    if (typeof prediction === "number") return prediction;
    if (typeof prediction !== "string") throw new Unreadable();
    const text = said(prediction);
    const before = BEFORE_NUMBER.exec(text);
    const unit = UNIT_AFTER_NUMBER.exec(text);
    const candidates = [
      before && [before[1], ""],
      unit && [unit[1], unit[2]],
    ];
    for (const candidate of candidates) {
      if (!candidate) continue;
      const [inner, rest] = candidate;
      if (rest.split(/\s+/).some((word) => NOT_UNITS.has(word))) continue;
      try {
        return bareNumber(inner);
      } catch (error) {
        if (!(error instanceof Unreadable)) throw error;
      }
    }
    return bareNumber(text);
  }

  function leaves(value) {
    return Array.isArray(value) ? value.flatMap(leaves) : [value];
  }

  /* mha.predictions._items, for an answer of numbers */
  function items(text, numbers) {
    const spoken = said(text).replace(/^(?:torch\.)?size\((.*)\)$/, "$1");
    const stack = [[]];
    for (const token of spoken.match(TOKEN) || []) {
      if (token === "(" || token === "[") {
        stack.push([]);
      } else if (token === ")" || token === "]") {
        if (stack.length === 1) throw new Unreadable();
        const inner = stack.pop();
        stack[stack.length - 1].push(inner);
      } else if (JOINED_NUMBERS.test(token)) {
        stack[stack.length - 1].push(...token.split(/[x×*-]/));
      } else if (JOINING_WORDS.has(token)) {
        continue;
      } else if (numbers && HEDGES.has(token)) {
        throw new Unreadable();
      } else if (!(numbers && NAME_WORD.test(token) && !NUMBER_WORDS.includes(token))) {
        stack[stack.length - 1].push(token);
      }
    }
    if (stack.length !== 1) throw new Unreadable();
    const found = stack[0];
    if (numbers && !leaves(found).length) throw new Unreadable();
    return found.length === 1 && Array.isArray(found[0]) ? found[0] : found;
  }

  function flatNumbers(found, answer) {
    const written = leaves(found);
    const wanted = leaves(answer);
    const digits = wanted.every((a) => Number.isInteger(a) && a >= 0 && a <= 9);
    if (digits && written.length !== wanted.length) {
      const runs = written.map(String);
      if (runs.every((run) => /^\d+$/.test(run))) {
        return runs.flatMap((run) => Array.from(run, Number));
      }
    }
    try {
      return written.map(number);
    } catch (error) {
      if (error instanceof Unreadable) return null;
      throw error;
    }
  }

  function readable(prediction, answer) {
    try {
      readAs(prediction, answer);
      return true;
    } catch (error) {
      return false;
    }
  }

  /* mha.predictions._same_kind: a sequence for a sequence, a single value for a value */
  function sameKind(prediction, answer) {
    if (Array.isArray(answer)) {
      const several = typeof prediction === "string" && (prediction.match(TOKEN) || []).length > 1;
      if (!(several || Array.isArray(prediction))) return false;
    } else if (Array.isArray(prediction)) {
      return false;
    }
    return readable(prediction, answer);
  }

  /* mha.predictions._read_as, for a number or a sequence of numbers */
  function readAs(prediction, answer) {
    if (typeof answer === "number") {
      if (Array.isArray(prediction)) throw new Unreadable();
      return number(prediction) === answer;
    }
    if (!Array.isArray(answer)) throw new Unreadable();
    if (typeof prediction === "string") {
      const numbers = leaves(answer).every((leaf) => typeof leaf === "number");
      const found = items(prediction, numbers);
      if (numbers) {
        const written = flatNumbers(found, answer);
        const wanted = leaves(answer);
        if (written !== null && written.length === wanted.length) {
          return written.every((x, i) => x === wanted[i]);
        }
      }
      return readAs(found, answer);
    }
    if (!Array.isArray(prediction)) throw new Unreadable();
    if (prediction.length !== answer.length) {
      if (answer.length && prediction.length && prediction.every((p) => sameKind(p, answer[0]))) {
        return false;
      }
      throw new Unreadable();
    }
    for (let i = 0; i < answer.length; i++) {
      if (!readAs(prediction[i], answer[i])) return false;
    }
    return true;
  }

  /* mha.gqa.block_lists_match: two lists of block numbers, counted from 1 or from 0 */
  function blockLists(prediction, answer) {
    let spoken = prediction;
    if (!/[[\]()]/.test(prediction)) {
      const parts = prediction.trim().split(LIST_BREAK).filter(Boolean);
      if (parts.length > 1) spoken = parts;
    }
    const fromZero = answer.map((blocks) => blocks.map((block) => block - 1));
    const verdicts = [];
    for (const convention of [answer, fromZero]) {
      try {
        verdicts.push(Boolean(readAs(spoken, convention)));
      } catch (error) {
        if (!(error instanceof Unreadable)) verdicts.push(false);
      }
    }
    if (!verdicts.length) throw new Unreadable();
    return verdicts.some(Boolean);
  }

  const READERS = { default: readAs, block_lists: blockLists };

  /* "right", "wrong" or "unreadable": how mha.predictions reads the typed ``text``. */
  function readGuess(text, answer, reader) {
    try {
      return READERS[reader || "default"](text, answer) ? "right" : "wrong";
    } catch (error) {
      return "unreadable";
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
      else if (ch < " " || ch === "\x7f") out += "\\x" + ch.charCodeAt(0).toString(16).padStart(2, "0");
      else out += ch;
    }
    return quote + out + quote;
  }

  /* The verdict mha.reveal gives a typed prediction, word for word. */
  function verdictOf(text, data) {
    const outcome = readGuess(text, data.answer, data.reader);
    const quoted = pythonRepr(text);
    if (outcome === "unreadable") {
      return {
        outcome,
        verdict:
          `Your prediction, ${quoted}, cannot be read as this answer: ` +
          `write it as ${data.format}.`,
      };
    }
    const said = outcome === "right" ? "matches the answer" : "is not what the code computes";
    return { outcome, verdict: `Your prediction, ${quoted}, ${said}.` };
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

  function buildGroup(data, id, cell) {
    const group = element("fieldset", "mha-guess");
    group.append(element("legend", "", "Your guess"));
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
      const label = element("label", "", "Type your guess, as you would write it on paper");
      label.htmlFor = input.id;
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
      typed.append(label, input, check);
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
