"""No answer is on screen before its reveal is opened.

For every reveal of every chapter page, at 390 and 1280 px, with every toggle closed: the text a
reader can see, from the top of the page down to the end of the first block after the reveal's
toggle (and all of the page around the article: the navigation, the "on this page" list of
headings), must not hold the answer's words or numbers. Nor may the landing page or an earlier
chapter's takeaways.

A heading right after the toggle ends that stretch only when it marks the turn, saying so
("After the answer: ..."); past any other heading, the block after it counts too.

On a phone (390 px) a reader who scrolls on sees more than one block before opening the reveal:
there the stretch also holds everything that starts within :data:`PHONE_REACH` pixels (about a
screen and a half) below the reveal's closed toggle, whatever heading comes between. What builds
on the answer goes inside the reveal (``evidence=``) or further down.

The answer comes from the page itself: the reveal box's hidden line "The answer: ...". What
counts as its words or numbers (:func:`answer_patterns`) is what would give it away and that an
innocent page does not print:

- a tuple or a pair of lists: each sequence of numbers in its printed order, "(2, 6, 4)", also
  written "2, 6, 4" or "2 × 6 × 4";
- a number of two digits or more: that number, with or without thousands separators;
- a small number: ``name=N``, where the question asks for ``name=?`` (a bare "4" is on every
  page, as a width, a step or a chapter);
- ``True``/``False``: the gloss the question gives it, "``False`` (worse)";
- a letter: the words of the chosen option beyond the letter, as runs of three words that no
  other option has (a shorter option: all its words, "1 GiB").

The question itself (from its heading to the toggle) legitimately lists every option, so option
words and glosses are looked for everywhere else; numbers and sequences are looked for
everywhere.

A small number or a boolean without a gloss has no words that a page could not print
innocently: those leaks ("four narrow heads each take one offset") were found and reworded by
reading, and this test cannot see them. ``test_most_reveals_have_words_to_look_for`` keeps that
blind spot from growing unnoticed.
"""

import ast
import re

import pytest

from .book_site import (
    DESKTOP,
    PHONE,
    chapters,
    clear_site_data,
    landing_page,
    wait_for_transitions,
)

VIEWPORTS = [PHONE, DESKTOP]
#: On a phone, how far below a closed reveal the text still counts as "in plain view" (CSS px).
PHONE_REACH = 1200
WIDTHS = [f"{v['width']}px" for v in VIEWPORTS]
CHAPTERS = chapters()
REVEALS = ".cell.tag_reveal"
#: The computed answer inside a reveal box (mha.reveal.Revealed): "<strong>The answer:</strong>
#: <code>...</code>".
ANSWER = ".mha-reveal details > code"
STOPWORDS = set(
    "a an the of to in on at by for and or but is are was be it its it's as with from that this "
    "than then so each one no not do does what which".split()
)

#: In the page: the text a reader sees (visible text nodes, and the alt text of visible images)
#: of the whole page, up to the end of the first block after the reveal cell ``index`` in the
#: article, and (with ``reach`` > 0) everything that starts less than ``reach`` px below the
#: cell. Returns [question, elsewhere]: the text from the last heading before the cell to the
#: cell, and all the rest.
VISIBLE_TEXT = r"""([index, reach]) => {
    const article = document.querySelector('article.bd-article');
    const cell = article.querySelectorAll('.cell.tag_reveal')[index];
    // The first block after the cell: its next sibling, or its parent's, entering sections.
    // A heading is a turn only when it says so ("After the answer: ..."); past any other
    // heading, the block after it counts.
    const next = element => {
        let e = element;
        while (e && !e.nextElementSibling) e = e.parentElement;
        e = e && article.contains(e) ? e.nextElementSibling : null;
        while (e && e.tagName === 'SECTION' && e.firstElementChild) e = e.firstElementChild;
        return e;
    };
    let block = next(cell);
    while (block && /^H[1-6]$/.test(block.tagName) && !/answer/i.test(block.textContent))
        block = next(block);
    const after = (a, b) =>
        Boolean(a.compareDocumentPosition(b) & Node.DOCUMENT_POSITION_FOLLOWING);
    const headings = [...article.querySelectorAll('h1, h2, h3, h4, h5, h6')];
    const heading = headings.filter(h => after(h, cell)).pop() || article;
    const seen = new Map();  // element -> shown: a text node asks again for its element
    const shown = element => {
        if (!seen.has(element)) seen.set(element, shownNow(element));
        return seen.get(element);
    };
    const shownNow = element => {
        for (let e = element; e; e = e.parentElement) {
            const closed = e.closest('details:not([open])');
            if (!closed) break;
            const summary = closed.querySelector(':scope > summary');
            if (!(summary && summary.contains(e))) return false;
            e = closed;
        }
        return element.checkVisibility({opacityProperty: true, visibilityProperty: true});
    };
    const limit = cell.getBoundingClientRect().bottom + reach;
    const top = node => {
        if (node.nodeType !== Node.TEXT_NODE) return node.getBoundingClientRect().top;
        const range = document.createRange();
        range.selectNodeContents(node);
        return range.getBoundingClientRect().top;
    };
    const parts = ['', ''];
    const walker = document.createTreeWalker(
        document.body, NodeFilter.SHOW_TEXT | NodeFilter.SHOW_ELEMENT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
        const element = node.nodeType === Node.TEXT_NODE ? node.parentElement : node;
        if (element.closest('script, style')) continue;
        let text = node.nodeType === Node.TEXT_NODE ? node.data
            : node.tagName === 'IMG' ? ' ' + (node.alt || '') + ' ' : '';
        if (!text || !shown(element)) continue;
        if (article.contains(node)) {
            const past = block ? after(block, node) && !block.contains(node)
                : after(cell, node) && !cell.contains(node);
            if (past && !(reach > 0 && top(node) < limit)) continue;
        }
        const inQuestion = (heading === node || after(heading, node)) && after(node, cell);
        parts[inQuestion ? 0 : 1] += text;
    }
    return parts;
}"""
#: The visible text of a page's "Key takeaways" section ("" when it has none).
TAKEAWAYS = """() => {
    const section = [...document.querySelectorAll('article section')]
        .find(s => /Key takeaways/.test(s.querySelector('h2')?.textContent || ''));
    return section ? section.innerText : '';
}"""


def normalised(text):
    """Lower case, typographic quotes and dashes as typed, whitespace collapsed."""
    text = text.replace("\u2019", "'").replace("\u2018", "'").replace("\u00a0", " ")
    return " ".join(text.lower().split())


def words(text):
    return re.findall(r"[\w']+", normalised(text))


def _number(n):
    """``n`` as a regex that accepts thousands separators and no neighbouring digit."""
    digits = str(abs(n))
    groups = [digits[max(0, i - 3) : i] for i in range(len(digits), 0, -3)][::-1]
    sign = "-" if n < 0 else ""
    grouped = "[,\u202f ]?".join(groups)
    return rf"(?<![\d.,]){sign}{grouped}(?![\d]|[.,]\d)"


def _sequences(value):
    """Every innermost sequence of numbers in ``value`` (a tuple, a list, nested)."""
    if all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        return [value]
    return [s for v in value if isinstance(v, tuple | list) for s in _sequences(v)]


def _trigrams(text):
    w = words(text)
    return {tuple(w[i : i + 3]) for i in range(len(w) - 2)}


def answer_patterns(answer, question, options):
    """Regexes (searched in :func:`normalised` text) that find ``answer`` (its printed form, as
    the reveal box shows it), and whether they may also be sought in the question itself.

    ``question`` is the question's visible text; ``options`` maps each offered letter to the
    text of its option.
    """
    try:
        value = ast.literal_eval(answer)
    except (ValueError, SyntaxError):
        value = answer
    if isinstance(value, bool):
        gloss = re.search(rf"{value}`?\s*\(([^)]+)\)", question.replace("\u2019", "'"))
        if not gloss:
            return [], False
        return [rf"\b{re.escape(normalised(gloss.group(1)))}\b"], False
    if isinstance(value, int):
        if abs(value) >= 10:
            return [_number(value)], True
        names = re.findall(r"(\w+)\s*=\s*\?", question)
        return [rf"\b{re.escape(name.lower())}\s*=\s*{value}(?!\d)" for name in names], True
    if isinstance(value, tuple | list):
        separator = r"\s*(?:,|×|x|by)\s*"
        return [
            r"(?<![\d.])" + separator.join(str(n) for n in sequence) + r"(?![\d.]|\s*,\s*\d)"
            for sequence in _sequences(value)
            if len(sequence) >= 2
        ], True
    if isinstance(value, str) and value in options:
        others = set().union(*(_trigrams(t) for k, t in options.items() if k != value))
        runs = [
            run
            for run in _trigrams(options[value]) - others
            if not set(run) <= STOPWORDS and not all(len(w) == 1 for w in run)
        ]
        if not runs and len(words(options[value])) > 1:  # a short option: "1 GiB", "d_in=1"
            runs = [tuple(words(options[value]))]
        return [r"\b" + r"\W+".join(map(re.escape, run)) + r"\b" for run in sorted(runs)], False
    return [], False


def offered_options(question):
    """``{letter: text}`` of the options the question lists ("- **A.** text")."""
    return {
        letter: text.strip()
        for letter, text in re.findall(r"(?:^|\n)\s*([A-Z])\.\s+(.+)", question)
    }


def leaks(page_texts, answer):
    """What of ``answer`` the page shows: ``page_texts`` is [question, elsewhere]."""
    question, elsewhere = page_texts
    patterns, in_question_too = answer_patterns(answer, question, offered_options(question))
    where = normalised(elsewhere + (" " + question if in_question_too else ""))
    return [m.group(0) for p in patterns for m in [re.search(p, where)] if m]


def reveal_answers(page):
    """The answer line of every reveal on the page, in order (one call for the page)."""
    answers = page.eval_on_selector_all(
        REVEALS, f"cells => cells.map(c => c.querySelector({ANSWER!r})?.textContent ?? null)"
    )
    return [None if answer is None else answer.strip() for answer in answers]


def question_texts(page, index):
    """[question, elsewhere], as :data:`VISIBLE_TEXT` reads them (on a phone, down to
    :data:`PHONE_REACH` below the reveal); the question's options keep their lines (inner text of
    its list items)."""
    reach = PHONE_REACH if page.viewport_size["width"] <= PHONE["width"] else 0
    question, elsewhere = page.evaluate(VISIBLE_TEXT, [index, reach])
    return [question.replace("\u2019", "'"), elsewhere]


def as_loaded(page):
    """``[(answer, [question, elsewhere]), ...]`` of every reveal of a page of this file's
    ``chapter_pages`` as it loaded (each test that writes into one takes it out again), read
    once a page: every test here reads them, and a read of a long chapter at 390 px walks all
    of its text for each reveal."""
    if not hasattr(page, "mha_as_loaded"):
        answers = reveal_answers(page)
        page.mha_as_loaded = list(
            zip(answers, [question_texts(page, i) for i in range(len(answers))], strict=True)
        )
    return page.mha_as_loaded


def leak_problems(page, chapter_name):
    """Every reveal whose answer shows before its toggle is opened, with what shows."""
    problems = []
    for i, (answer, texts) in enumerate(as_loaded(page)):
        where = f"{chapter_name}, reveal {i + 1}"
        if answer is None:
            problems.append(f"{where}: no 'The answer:' line in its box")
            continue
        found = leaks(texts, answer)
        if found:
            problems.append(f"{where} (answer {answer!r}) shows before its toggle: {found}")
    return problems


def _options_keep_their_lines(page):
    """Each list item starts its own line in the extracted text, so options can be told apart."""
    page.evaluate(
        "() => document.querySelectorAll('article li').forEach("
        "li => li.insertBefore(document.createTextNode('\\n'), li.firstChild))"
    )


@pytest.fixture(scope="module")
def chapter_pages(reading_page, book_url):
    """``chapter_pages(chapter, viewport)``: the chapter's page at that width, loaded once for
    every test of this file (they read it, and the injected answers are taken out again)."""
    pages = {}

    def open_chapter(chapter, viewport):
        key = (chapter.name, viewport["width"])
        if key not in pages:
            page = reading_page(viewport, "light")
            clear_site_data(page, book_url)  # as a first visit: no theme or guess stored
            page.goto(f"{book_url}/{chapter.url_path}")
            wait_for_transitions(page)
            _options_keep_their_lines(page)
            pages[key] = page
        return pages[key]

    yield open_chapter
    for page in pages.values():
        page.close()


@pytest.mark.parametrize("viewport", VIEWPORTS, ids=WIDTHS)
@pytest.mark.parametrize("chapter", CHAPTERS, ids=[c.name for c in CHAPTERS])
def test_no_answer_shows_before_its_reveal(chapter_pages, chapter, viewport):
    page = chapter_pages(chapter, viewport)
    problems = leak_problems(page, chapter.name)
    assert not problems, "\n".join(problems)


def test_neither_the_landing_page_nor_an_earlier_takeaway_gives_an_answer(
    visit, book_url, chapter_pages
):
    page = visit(f"{book_url}/{landing_page()}").page
    seen = {"the landing page": page.locator("article.bd-article").inner_text()}
    problems = []
    for chapter in CHAPTERS:
        page = chapter_pages(chapter, DESKTOP)
        for i, (answer, (question, _)) in enumerate(as_loaded(page)):
            for source, text in seen.items():
                found = leaks([question, text], answer)
                if found:
                    problems.append(
                        f"{chapter.name}, reveal {i + 1} (answer {answer!r}): {source} says {found}"
                    )
        seen[f"{chapter.name}'s takeaways"] = page.evaluate(TAKEAWAYS)
    assert not problems, "\n".join(problems)


def test_most_reveals_have_words_to_look_for(chapter_pages):
    """The blind spot (small numbers, unglossed booleans) stays small."""
    total, checkable = 0, 0
    for chapter in CHAPTERS:
        page = chapter_pages(chapter, DESKTOP)
        for answer, (question, _) in as_loaded(page):
            patterns, _ = answer_patterns(answer, question, offered_options(question))
            total += 1
            checkable += bool(patterns)
    assert total and checkable >= 0.6 * total, f"only {checkable} of {total} reveals checkable"


# ---------------------------------------------------------------------------------------------
# The test can fail: answers put on screen on purpose are caught
# ---------------------------------------------------------------------------------------------

#: Puts a paragraph into the page: above the question's heading, right after the toggle, or
#: ``below`` px further down (after an empty block that tall), marked, so that REMOVE takes it
#: out again and the page is as it was.
INJECT = """([index, text, above, below]) => {
    const article = document.querySelector('article.bd-article');
    const cell = article.querySelectorAll('.cell.tag_reveal')[index];
    const before = (a, b) =>
        Boolean(a.compareDocumentPosition(b) & Node.DOCUMENT_POSITION_FOLLOWING);
    const heading = [...article.querySelectorAll('h1, h2, h3, h4, h5, h6')]
        .filter(h => before(h, cell)).pop();
    const p = document.createElement('p');
    p.textContent = text;
    p.dataset.mhaPutOnPurpose = '';
    const spacer = document.createElement('div');
    spacer.style.height = `${below}px`;
    spacer.dataset.mhaPutOnPurpose = '';
    if (above) heading.parentElement.insertBefore(p, heading);
    else if (below) cell.parentElement.insertBefore(spacer, cell.nextSibling);
    if (!above) (below ? spacer : cell).after(p);
}"""
REMOVE = "() => document.querySelectorAll('[data-mha-put-on-purpose]').forEach(e => e.remove())"
#: Where an answer is put on purpose: (above the question?, px of empty space after the toggle).
PLACES = {
    "above the question": (True, 0),
    "right after the toggle": (False, 0),
    "a screen below the toggle": (False, 900),
}


@pytest.mark.parametrize(
    ("where", "viewport"),
    [(where, viewport) for where in PLACES for viewport in VIEWPORTS if PLACES[where][1] == 0]
    + [("a screen below the toggle", PHONE)],
    ids=lambda v: f"{v['width']}px" if isinstance(v, dict) else v,
)
def test_an_answer_put_on_the_page_is_caught(chapter_pages, viewport, where):
    """Every checkable reveal of every chapter: its answer's own words, written into the page
    above the toggle, in the block right after it or (on a phone) a screen further down, are
    found."""
    missed = []
    for chapter in CHAPTERS:
        page = chapter_pages(chapter, viewport)
        for i, (answer, (question, _)) in enumerate(as_loaded(page)):
            options = offered_options(question)
            patterns, _ = answer_patterns(answer, question, options)
            if not patterns:
                continue
            said = options.get(answer, answer)
            if answer.startswith(("True", "False")):
                said = re.search(rf"{answer}`?\s*\(([^)]+)\)", question).group(1)
            elif re.fullmatch(r"\d", answer):
                name = re.search(r"(\w+)\s*=\s*\?", question).group(1)
                said = f"so {name}={answer}"
            page.evaluate(INJECT, [i, f"In short: {said}.", *PLACES[where]])
            try:
                if not leaks(question_texts(page, i), answer):
                    missed.append(f"{chapter.name}, reveal {i + 1}: {said!r} {where}")
            finally:  # the page is shared with the other tests of this file
                page.evaluate(REMOVE)
    assert not missed, "not caught:\n" + "\n".join(missed)


@pytest.mark.parametrize(
    ("answer", "question", "leaky", "innocent"),
    [
        ("(2, 6, 4)", "What shape?", "it returns (2, 6, 4)", "it returns (2, 6, 3)"),
        ("(2, 6, 4)", "What shape?", "a 2 × 6 × 4 tensor", "shape (12, 6, 4, 2)"),
        (
            "((2, 6, 3, 2), (2, 3, 6, 2))",
            "Both shapes?",
            "after view: (2, 6, 3, 2)",
            "(2, 6, 6) then (3, 2)",
        ),
        ("([1, 1, 2, 2], [1, 2, 1, 2])", "Which?", "heads 1, 1, 2, 2", "heads 1, 2"),
        ("8388608", "How many?", "8,388,608 bytes", "838,860 bytes"),
        ("136", "How many blocks?", "136 blocks", "1360 blocks or 13.6"),
        ("4", "Which d_out=? gives 12?", "need d_out=4", "d_out=2 and 4 heads"),
        ("False", "Record True (as well) or False (worse).", "it does worse", "it does well"),
    ],
)
def test_the_answers_words_are_told_from_innocent_text(answer, question, leaky, innocent):
    assert leaks([question, leaky], answer), f"{leaky!r} gives {answer!r} away"
    assert not leaks([question, innocent], answer), f"{innocent!r} does not give {answer!r}"


def test_an_options_own_words_are_caught_outside_the_question_only():
    question = (
        "What goes in?\n A. Head 1's result: a chain.\n B. The wrapper's own argument x,"
        " the very tensor head 1 was given.\n C. An empty tensor."
    )
    assert offered_options(question)["B"].startswith("The wrapper's")
    assert leaks([question, "its input was the very tensor object"], "B")
    assert not leaks([question, "a tensor of the same values"], "B")


def test_an_answer_beyond_the_phone_reach_is_not_counted(chapter_pages):
    """The reach is a distance: past PHONE_REACH of empty space, an answer no longer counts as
    in plain view (checked on the first reveal with a tuple answer that shows nothing of it)."""
    for chapter in CHAPTERS:
        page = chapter_pages(chapter, PHONE)
        for i, (answer, texts) in enumerate(as_loaded(page)):
            if answer and answer.startswith("(") and not leaks(texts, answer):
                try:
                    page.evaluate(INJECT, [i, f"In short: {answer}.", False, PHONE_REACH + 100])
                    assert not leaks(question_texts(page, i), answer)
                finally:
                    page.evaluate(REMOVE)
                return
    pytest.fail("no reveal with a tuple answer that shows nothing of it")
