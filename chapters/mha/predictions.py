"""Reading a reader's prediction: a choice by its label, a typed answer by one small grammar.

The module the rest of the book reads predictions with (:mod:`mha.reveal`, :mod:`mha.gqa`):
:func:`read` says whether a prediction says the answer, :func:`prediction_matches` says so
without raising, :func:`format_of` how to write one, :func:`offered` which choices a question
offers. Each kind of answer is read by a module of its own, whose docstring holds its rules:

- a choice's label, ``"B"``, ``"(B)"``, ``"yes"``, ``"4 offsets"``: :mod:`mha.prediction_labels`;
- a number, ``8,388,608``, ``2**23``, ``136 blocks``: :mod:`mha.prediction_numbers`;
- a sequence of numbers (a shape, a pair of shapes, two lists), ``(2, 6, 4)``,
  ``[1, 1, 2, 2] and [1, 2, 1, 2]``: :mod:`mha.prediction_sequences`.

A number or a sequence is a Python value or text in that grammar, which the web page's text
box reads too (``_static/guess.js``); the case table ``tests/prediction_cases.json`` holds
both readers to the same verdicts.

Spaces, quotes and backticks around text and a final full stop do not count. A right answer
is never called wrong: what the grammar cannot read (a word, a sign it does not
know, a letter the question does not offer) is :class:`Unreadable`, and the verdict then says
how to write it (:func:`format_of`, :mod:`mha.prediction_format`), without quoting the answer
as its example.
"""

from .prediction_format import format_of
from .prediction_labels import _label, offered
from .prediction_numbers import _number_text
from .prediction_sequences import _judge, _nested
from .prediction_values import Unreadable, _is_number, _plain, _same

__all__ = ["Unreadable", "format_of", "offered", "prediction_matches", "read"]


def read(prediction, answer, choices=None):
    """Whether ``prediction`` says ``answer``; :class:`Unreadable` if it cannot be read.

    ``choices`` (a dict from each label to the text of its choice, or a sequence of the
    answers the question offers) make the question a choice: a prediction names a label or
    is unreadable. A True or False answer offers True and False.
    """
    prediction, answer, choices = _plain(prediction), _plain(answer), offered(choices)
    if choices is None and isinstance(answer, bool):
        choices = (True, False)
    if choices is not None:
        return _same(_label(prediction, choices), answer)
    if isinstance(answer, str):  # a label, with no other label known: naming it is right
        if not isinstance(prediction, str):
            raise Unreadable
        try:
            return _label(prediction, (answer,)) == answer
        except Unreadable:
            return False
    if _is_number(answer):
        if isinstance(prediction, str):
            return _number_text(prediction) == answer
        if not _is_number(prediction):
            raise Unreadable
        return prediction == answer
    if isinstance(answer, (list, tuple)):
        return _judge(_nested(prediction), answer)
    raise Unreadable


def prediction_matches(prediction, answer, choices=None):
    """Whether ``prediction`` says ``answer`` (:func:`read`); ``False`` if it cannot be read."""
    try:
        return bool(read(prediction, answer, choices))
    except Exception:  # unreadable, or an exotic object that cannot even be compared
        return False
