"""Reading a choice's label: which of the labels a question offers a prediction names.

A question with choices is answered by a label: its letter ("B"), or the value it offers
(``True``, ``4``, ``"spread"``), written as people write one. Case, spaces, quotes and
brackets around the label do not count, nor punctuation after it: ``"(B)"``, ``"b)"``,
``"B."``, ``"option B"``. Nor does what follows it after a separator (brackets, ``:``,
``.``, ``)``, ``,``, ``;`` or a dash), unless that names another label or a number:
``"B (the same x)"``, ``"B: view raises an error"``, ``"True (same output)"``, but not
``"A, B"``, ``"B or C"``, ``"B (or C)"``. True is also "yes", False "no". The text of a
choice alone names it, and so does a label followed by its own text ("True the same
output"). A number label is read as a number (``"4 offsets"``). Anything else names no
label: "A and B", "the second one". On the web page the reader presses a button instead
(``_static/guess.js``, which reads labels by the same rules).
"""

import re

from .prediction_numbers import _number_text
from .prediction_values import Unreadable, _is_number, _plain, _same, _tidy

#: What may stand before a label: "option B", "choice: B", "(B", "[B".
_BEFORE = r"^(?:(?:option|choice|answer)\s*:?\s*)?[(\[]?\s*"
#: What may follow a label: a closing bracket, punctuation, then a separator and text.
_AFTER = r"\s*[)\]]?\s*[.:!?]?(?:(?:\s*[(\[]|\s*[:,;=\u2013\u2014-]|(?<=[.):!?\]])\s)(.*))?$"
#: Text after a label that hedges between labels: "or C", "/ no", "and B".
_HEDGE = re.compile(r"(?:or|and|nor|vs)\b|[/&|]", re.I)


def _spellings(label):
    """How a reader may write ``label``: its text; yes or no for True or False."""
    spelt = [str(label)]
    if isinstance(label, bool):
        spelt.append("yes" if label else "no")
    return spelt


def _names_another(text, label, labels):
    """Whether ``text``, written after ``label``, hedges or names another label or a number."""
    text = _tidy(text).strip("()[] ")
    first = re.split(r"[\s,;:.)\]]+", text, maxsplit=1)[0]
    letter = re.compile(r"[A-Z]")
    others = [spelt for other in labels if not _same(other, label) for spelt in _spellings(other)]
    numbered = any(_is_number(other) for other in labels)
    return (
        _HEDGE.match(text) is not None
        or (numbered and re.match(r"[+-]?[0-9]", text) is not None)
        or any(
            first == spelt if letter.fullmatch(spelt) else first.casefold() == spelt.casefold()
            for spelt in others
        )
    )


def _own_text(text, label, choices):
    """Whether ``text`` is ``label``'s own text in ``choices`` (any case, any final stop)."""
    if not isinstance(choices, dict) or not isinstance(choices.get(label), str):
        return False
    return _tidy(text).casefold() == _tidy(choices[label]).casefold()


def _label(prediction, labels):
    """The label ``prediction`` names (the module's rules for a choice), or Unreadable."""
    for label in labels:
        if _same(prediction, label):
            return label
    if not isinstance(prediction, str):
        raise Unreadable
    said = _tidy(prediction)
    named = [label for label in labels if _own_text(said, label, labels)]
    for label in labels:
        if _is_number(label):
            try:
                if _same(_number_text(said), label):  # "4 offsets", "4.0"
                    named.append(label)
            except Unreadable:
                pass
        spelt = "|".join(map(re.escape, _spellings(label)))
        found = re.match(f"{_BEFORE}(?:{spelt}){_AFTER}", said, re.I)
        if found is not None and not (
            found.group(1) and _names_another(found.group(1), label, labels)
        ):
            named.append(label)
        found = re.match(f"{_BEFORE}(?:{spelt})\\s+(.*)$", said, re.I)
        if found is not None and _own_text(found.group(1), label, labels):
            named.append(label)  # "True the same output"
    if len({str(label) for label in named}) != 1:
        raise Unreadable
    return named[0]


def offered(choices, answer=None):
    """``choices`` as a dict of labels or a tuple of answers; ``None`` if it offers nothing.

    With ``answer``, a ValueError if the answer is none of the choices.
    """
    choices = choices if choices is None or isinstance(choices, dict) else tuple(choices)
    if not choices:
        return None
    if answer is not None and not any(_same(_plain(answer), label) for label in choices):
        raise ValueError(f"the answer {answer!r} is none of the choices {list(choices)}")
    return choices
