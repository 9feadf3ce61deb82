"""A web reader commits a guess in the page, for every prediction (_static/guess.js).

At 390 px with touch and at 1280 px every reveal of every chapter has, before its toggle, a group
of controls named "Your guess": a button per choice, or a text box that says the format to write
and "Check my guess". A guess gets Python's verdict word for word and opens the answer; the
chapter's tally counts it; guesses stay in localStorage, never leave the browser, and clear. The
page's reader reads the shared table of cases (tests/prediction_cases.json) as mha.predictions
does, and every form of it typed into a chapter's "Your guess" box for the same answer gets
Python's verdict there, word for word.

One browser, one page per width for the tour of the chapters, a few more for the rest.
"""

import base64
import html
import json
import re
from pathlib import Path

import pytest
from axe_playwright_python.sync_playwright import Axe

from mha.gqa import block_lists_match
from mha.reveal import _verdict

from .book_site import BUILD, DESKTOP, PHONE, chapters, is_local, wait_for_transitions

TABLE = json.loads((Path(__file__).parents[1] / "prediction_cases.json").read_text("utf-8"))
#: The table's cases written as text (what a reader types), their choices spelled out.
TEXT = [
    {**c, "choices": TABLE["choices"][c["choices"]]} if "choices" in c else c
    for c in TABLE["cases"]
    if isinstance(c["prediction"], str)
]
READERS = {"block_lists": block_lists_match}
GROUP = "fieldset.mha-guess"
MIN_TAP_PX = 44
FIRST = chapters()[0]


def as_tuples(value):
    return tuple(as_tuples(v) for v in value) if isinstance(value, list) else value


def as_python(choices):
    """A case's choices as the reveal passes them: [label, text] pairs (True and False) a dict."""
    if isinstance(choices, list) and all(isinstance(c, list) for c in choices):
        return dict(map(tuple, choices))
    return tuple(choices) if isinstance(choices, list) else choices


@pytest.fixture
def open_page(browser, book_url):
    """``open_page(path, viewport, touch=False)``: a fresh context and page (own storage) that
    records page errors, cookies and every request that is not to 127.0.0.1."""
    contexts = []

    def opening(path, viewport=DESKTOP, touch=False, color_scheme="light"):
        context = browser.new_context(
            viewport=viewport, has_touch=touch, is_mobile=touch, color_scheme=color_scheme
        )
        contexts.append(context)
        page = context.new_page()
        page.errors, page.remote = [], []
        page.on("pageerror", lambda error: page.errors.append(str(error)))

        def stay_local(route, request):
            if is_local(request.url):
                route.continue_()
            else:
                page.remote.append(request.url)
                route.abort()

        context.route("**/*", stay_local)
        page.goto(f"{book_url}/{path}")
        return page

    yield opening
    for context in contexts:
        context.close()


def payloads(page):
    """What each reveal box carries for its guess controls, decoded, in page order."""
    encoded = page.eval_on_selector_all(
        "article .cell.tag_reveal [data-mha-guess]", "nodes => nodes.map(n => n.dataset.mhaGuess)"
    )
    return [json.loads(base64.b64decode(e)) for e in encoded]


def built_payloads(chapter):
    """``payloads`` of ``chapter``, read from its built page without a browser: the chapters with
    no typed question of the table's answers need no load at 390 px."""
    encoded = re.findall(r'data-mha-guess="([^"]*)"', (BUILD / chapter.url_path).read_text())
    return [json.loads(base64.b64decode(html.unescape(e))) for e in encoded]


def go_to(page, chapter):
    """Open ``chapter`` in ``page``, unless it is already there (a load at 390 px is about 1 s of
    CPU)."""
    url = page.url.rsplit("/chapters/", 1)[0] + "/" + chapter.url_path
    if page.url != url:
        page.goto(url)


#: The height each control is drawn at (what Playwright's ``bounding_box`` reports).
CONTROL_HEIGHTS = "controls => controls.map(c => c.getBoundingClientRect().height)"


def group_problems(page, chapter, touch):
    """Every reveal of ``chapter`` has its "Your guess" group, right before its toggle, with
    controls big enough to tap and named for a screen reader; no answer shows in it."""
    problems = []
    reveals = chapter.hidden_cells_in_notebook().count("reveal")
    groups = page.get_by_role("group", name=re.compile(r"^Your guess: \S"))
    if groups.count() != reveals:
        problems.append(f"{chapter.name}: {reveals} reveals, {groups.count()} 'Your guess' groups")
    names = page.eval_on_selector_all(GROUP, "gs => gs.map(g => g.getAttribute('aria-label'))")
    if len(set(names)) != len(names):  # each named for its question: two alike sound the same
        problems.append(f"{chapter.name}: guess groups share a name: {names}")
    before_toggle = page.eval_on_selector_all(
        GROUP,
        "gs => gs.every(g => g.nextElementSibling?.matches('.cell.tag_reveal')"
        " && !g.nextElementSibling.querySelector(':scope > details').open)",
    )
    if not before_toggle:
        problems.append(f"{chapter.name}: a group is not right before a closed answer toggle")
    for i, data in enumerate(payloads(page)):
        # By its CSS class: the role query above finds the same groups (both counts are
        # checked), and run again for each call on a group it cost about 0.3 s of CPU a
        # chapter (the browser computes every element's role and name on the page).
        group = page.locator(GROUP).nth(i)
        where = f"{chapter.name}, prediction {i + 1}"
        if data.get("choices"):
            names = group.get_by_role("button").all_inner_texts()
            if names != [c["label"] for c in data["choices"]]:
                problems.append(f"{where}: buttons {names}, choices {data['choices']}")
        else:
            box = group.get_by_role("textbox", name="Type your guess", exact=False)
            check = group.get_by_role("button", name="Check my guess", exact=True)
            if box.count() != 1 or check.count() != 1:
                problems.append(f"{where}: no labelled text box and 'Check my guess' button")
            form = group.locator(".mha-guess-format")
            if form.inner_text() != f"Write it as {data['format']}." or box.get_attribute(
                "aria-describedby"
            ) != form.get_attribute("id"):
                problems.append(f"{where}: the box does not say the format to write")
        # Every control's height in one call, not one call each.
        heights = group.locator("button, input").evaluate_all(CONTROL_HEIGHTS) if touch else []
        for height in heights:
            if height < MIN_TAP_PX:
                problems.append(f"{where}: a control is {height:.0f} px tall, under {MIN_TAP_PX}")
        text = group.inner_text()
        if "matches the answer" in text or "not what the code computes" in text:
            problems.append(f"{where}: a verdict shows before any guess")
    return problems


@pytest.mark.parametrize(
    "viewport, touch", [(PHONE, True), (DESKTOP, False)], ids=["390px-touch", "1280px"]
)
def test_every_prediction_of_every_chapter_has_its_guess_controls(open_page, viewport, touch):
    page = open_page(FIRST.url_path, viewport, touch)
    problems, total = [], 0
    for chapter in chapters():
        go_to(page, chapter)
        problems += group_problems(page, chapter, touch)
        total += page.locator(GROUP).count()
        tally = page.locator(".mha-guess-tally-count")
        if page.locator(GROUP).count() and tally.inner_text() != (
            f"Predictions: 0 of {page.locator(GROUP).count()} right"
        ):
            problems.append(f"{chapter.name}: tally says {tally.inner_text()!r}")
    assert not problems, "\n".join(problems)
    in_notebooks = sum(c.hidden_cells_in_notebook().count("reveal") for c in chapters())
    assert total == in_notebooks >= 20, f"{total} guess groups, {in_notebooks} reveals"
    assert not page.errors and not page.remote


def committed(page, index):
    """The verdict shown for prediction ``index`` and whether its answer is now open."""
    group = page.locator(GROUP).nth(index)
    return group.locator(".mha-guess-verdict").inner_text(), page.eval_on_selector_all(
        GROUP, "(gs, i) => gs[i].nextElementSibling.querySelector(':scope > details').open", index
    )


def test_a_guess_gets_pythons_verdict_opens_the_answer_and_is_counted(open_page):
    page = open_page(FIRST.url_path, PHONE, touch=True)
    data = payloads(page)
    choice_q = next(i for i, d in enumerate(data) if d.get("choices"))
    typed_q = [i for i, d in enumerate(data) if not d.get("choices")]
    wrong = next(c for c in data[choice_q]["choices"] if not c["right"])
    right = next(c for c in data[choice_q]["choices"] if c["right"])
    groups = page.locator(GROUP)

    # A wrong choice, tapped: Python's verdict, the answer opens, the tally counts it.
    groups.nth(choice_q).get_by_role("button", name=wrong["label"], exact=True).tap()
    verdict, opened = committed(page, choice_q)
    assert verdict == wrong["verdict"] and "is not what the code computes" in verdict
    assert opened, "the answer did not open after the guess"
    assert page.locator(".cell.tag_reveal .mha-reveal").nth(choice_q).is_visible()
    assert groups.nth(choice_q).get_by_role("button", name=right["label"]).is_disabled()
    total = groups.count()
    assert page.locator(".mha-guess-tally-count").inner_text() == f"Predictions: 0 of {total} right"

    # A typed guess it cannot read: the format, in Python's words; the answer stays closed.
    first = typed_q[0]
    answer = as_tuples(data[first]["answer"])
    box = groups.nth(first).get_by_role("textbox")
    box.fill("dunno")
    groups.nth(first).get_by_role("button", name="Check my guess").tap()
    verdict, opened = committed(page, first)
    assert verdict == _verdict("dunno", answer, None) and "cannot be read" in verdict
    assert not opened
    # ...then a right one, written as the book's prompt suggests, committed with Enter.
    said = ", ".join(str(n) for n in answer) if isinstance(answer, tuple) else str(answer)
    box.fill(said.replace(", ", " by "))
    box.press("Enter")
    verdict, opened = committed(page, first)
    assert verdict == _verdict(said.replace(", ", " by "), answer, None)
    assert verdict.endswith("matches the answer.") and opened
    assert page.locator(".mha-guess-tally-count").inner_text() == f"Predictions: 1 of {total} right"

    # Kept in this browser only: localStorage, no cookie, no request off the machine.
    stored = page.evaluate(
        "Object.keys(localStorage).filter(k => k.startsWith('mha-guesses:'))"
        ".map(k => JSON.parse(localStorage.getItem(k)))"
    )
    assert len(stored) == 1 and len(stored[0]) == 2
    assert page.context.cookies() == []
    page.reload()
    assert committed(page, choice_q)[0] == wrong["verdict"], "the guess was not kept"
    assert page.locator(".mha-guess-tally-count").inner_text() == f"Predictions: 1 of {total} right"

    page.get_by_role("button", name="Clear my guesses").tap()
    assert page.locator(".mha-guess-tally-count").inner_text() == f"Predictions: 0 of {total} right"
    assert committed(page, choice_q)[0] == ""
    assert groups.nth(choice_q).get_by_role("button", name=right["label"]).is_enabled()
    assert (
        page.evaluate("Object.keys(localStorage).filter(k => k.startsWith('mha-guesses:'))") == []
    )
    assert not page.errors and not page.remote, (page.errors, page.remote)


def test_a_guess_is_made_with_the_keyboard_and_focus_shows(open_page):
    page = open_page(FIRST.url_path, DESKTOP)
    data = payloads(page)
    choice_q = next(i for i, d in enumerate(data) if d.get("choices"))
    group = page.locator(GROUP).nth(choice_q)
    buttons = group.get_by_role("button")
    buttons.first.focus()
    page.keyboard.press("Shift+Tab")
    page.keyboard.press("Tab")  # back by keyboard: :focus-visible applies
    outline = buttons.first.evaluate("b => getComputedStyle(b).outlineStyle")
    assert outline not in ("none", ""), "a focused guess button shows no outline"
    page.keyboard.press("Tab")
    page.keyboard.press("Enter")
    verdict, opened = committed(page, choice_q)
    assert verdict == data[choice_q]["choices"][1]["verdict"] and opened


def test_the_pages_reader_reads_the_shared_cases_as_python_does(open_page):
    page = open_page(FIRST.url_path)
    got = page.evaluate(
        "cases => cases.map(c => window.mhaGuess.verdictOf(c.prediction, {...c, format: 'F'}))",
        TEXT,
    )
    wrong = [
        f"{c['prediction']!r} for {c['answer']}: page {g['outcome']}, table {c['read']}"
        for c, g in zip(TEXT, got, strict=True)
        if g["outcome"] != c["read"]
    ]
    assert not wrong, "\n".join(wrong)
    for case, said in zip(TEXT, got, strict=True):  # ...in Python's words
        reader = READERS.get(case.get("reader"))
        choices = as_python(case.get("choices"))
        expected = _verdict(case["prediction"], as_tuples(case["answer"]), reader, choices)
        assert said["verdict"] == re.sub(r"write it as .*", "write it as F.", expected)


def typed_rows(data):
    """The table's text cases for the typed question whose payload is ``data`` (none for a
    question with choices). An empty box gets "Type a guess first", not a verdict."""
    return [
        c
        for c in TEXT
        if "choices" not in c
        and c["answer"] == data.get("answer")
        and c.get("reader", "default") == data.get("reader")
        and c["prediction"].strip()
    ]


#: "Clear my guesses", pressed by the page's script: between two typed forms, a click of its own
#: (test_a_guess_gets_pythons_verdict_opens_the_answer_and_is_counted) scrolled the phone's page
#: to the button and back, and a role query for it named every element of the page first.
CLEAR = "document.querySelector('button.mha-guess-clear').click()"
#: A group's verdict as shown (its rendered text); then, if the verdict settled the guess (its
#: text box disabled), the guess cleared as CLEAR does, for the next case.
VERDICT_THEN_CLEAR = f"""group => {{
    const [verdict, ...more] = group.querySelectorAll('.mha-guess-verdict');
    if (!verdict || more.length) throw new Error(`${{more.length + !!verdict}} verdicts`);
    const shown = verdict.innerText;
    if (group.querySelector('input').disabled) {CLEAR};
    return shown;
}}"""


def test_each_form_typed_in_a_chapters_box_gets_pythons_verdict(open_page):
    """Every text case of the table whose answer is a typed question's answer in a chapter
    ("136 blocks" for chapter 7's 136), typed into that question's box and committed, shows
    the verdict Python gives it, format and all."""
    page = open_page(FIRST.url_path, PHONE, touch=True)
    problems, typed = [], 0
    for chapter in [c for c in chapters() if any(map(typed_rows, built_payloads(c)))]:
        go_to(page, chapter)
        for i, data in enumerate(payloads(page)):
            rows = typed_rows(data)
            group = page.locator(GROUP).nth(i)
            for case in rows:
                box = group.get_by_role("textbox")
                box.fill(case["prediction"])
                box.press("Enter")
                # The verdict, and the guess cleared for the next where a verdict settled it
                # (its box disabled): one call, not three (about 0.05 s of CPU a case).
                shown = group.evaluate(VERDICT_THEN_CLEAR)
                answer, reader = as_tuples(case["answer"]), READERS.get(case.get("reader"))
                said = _verdict(case["prediction"], answer, reader)  # the format: the chapter's
                said = re.sub(r"write it as .*", f"write it as {data['format']}.", said)
                if shown != said:
                    problems.append(f"{chapter.name}: {case['prediction']!r} shows {shown!r}")
                typed += 1
    assert not problems, "\n".join(problems)
    assert typed >= 100 and not page.errors and not page.remote, (typed, page.errors)


def test_the_controls_pass_axe_and_leave_print(open_page):
    problems = []
    for viewport, scheme in ((PHONE, "light"), (DESKTOP, "dark")):
        page = open_page(FIRST.url_path, viewport, touch=viewport is PHONE, color_scheme=scheme)
        page.locator(GROUP).first.get_by_role("button").first.click()  # a verdict on show
        wait_for_transitions(page)
        mine = {"include": [[GROUP], [".mha-guess-tally"]]}  # every rule, any impact
        for violation in Axe().run(page, context=mine).response["violations"]:
            problems.append(
                f"{scheme} {viewport['width']}px: {violation['id']}: {violation['help']}"
            )
    assert not problems, "\n".join(problems)
    page.emulate_media(media="print")
    assert not page.locator(GROUP).first.is_visible()
    assert not page.locator(".mha-guess-tally").is_visible()
