"""What a reveal box carries for the web page's "Your guess" controls (mha.reveal.guess_data).

The page builds its controls from it (_static/guess.js); everywhere else it is inert: an empty,
hidden element inside the box's closed content, absent from the text form nbval compares.
"""

import base64
import json
import re

from mha.gqa import block_lists_match
from mha.reveal import Revealed, _verdict, guess_data, reveal

CHOICES = {"A": "Head 1's result", "B": "The wrapper's own argument x"}


def carried(html):
    found = re.findall(r'<div class="mha-guess-data" hidden data-mha-guess="([^"]+)"></div>', html)
    assert len(found) == 1, html
    return json.loads(base64.b64decode(found[0]))


def test_a_question_with_choices_carries_pythons_verdict_on_each():
    data = guess_data("B", None, CHOICES)
    assert [c["label"] for c in data["choices"]] == [
        "A. Head 1's result",
        "B. The wrapper's own argument x",
    ]
    assert [c["right"] for c in data["choices"]] == [False, True]
    assert data["choices"][1]["verdict"] == _verdict("B", "B", None, CHOICES)


def test_true_or_false_offers_both_and_says_what_each_means_where_given(capsys):
    assert [c["label"] for c in guess_data(False)["choices"]] == ["True", "False"]
    same = {True: "the same output", False: "a different output"}
    buttons = guess_data(True, None, same)["choices"]
    assert [c["label"] for c in buttons] == ["True: the same output", "False: a different output"]
    assert [c["right"] for c in buttons] == [True, False]
    reveal(True, "the same output", choices=same)
    assert capsys.readouterr().out.startswith(
        "The answer: True (the same output)\nYour prediction, 'the same output', matches"
    )
    html = Revealed(True, "", "Why.", meaning="the same output")._repr_html_()
    assert "<code>True</code> (the same output)" in html  # the answer itself, then its meaning
    reveal(False, "yes", choices=(True, False))  # no meanings given: the answer alone
    assert capsys.readouterr().out.startswith("The answer: False\nYour prediction, 'yes', is not")


def test_a_number_or_a_sequence_carries_its_answer_reader_and_format():
    assert guess_data((2, 6, 4)) == {
        "answer": [2, 6, 4],
        "reader": "default",
        "format": "a tuple of 3 whole numbers, such as (1, 2, 3)",
    }
    assert guess_data(([1, 2], [2, 1]), block_lists_match)["reader"] == "block_lists"


def test_a_rule_without_a_page_twin_or_an_answer_the_page_cannot_read_gets_no_controls():
    assert guess_data(4, lambda prediction, answer: True) is None
    assert guess_data("some words") is None


def test_the_data_is_hidden_inside_the_closed_box_and_not_in_the_text_form():
    revealed = Revealed(
        (2, 6, 4), "", "Batch and tokens pass through.", guess=guess_data((2, 6, 4))
    )
    html = revealed._repr_html_()
    assert carried(html)["answer"] == [2, 6, 4]
    assert html.index('<details class="mha-hidden">') < html.index("mha-guess-data")
    assert "mha-guess" not in str(revealed)
    assert "mha-guess" not in Revealed((2, 6, 4), "", "x")._repr_html_()
