"""What every reader of a prediction shares: :class:`Unreadable`, and a value made plain.

A prediction is read as a number, a sequence of numbers or a choice's label
(:mod:`mha.prediction_numbers`, :mod:`mha.prediction_sequences`,
:mod:`mha.prediction_labels`); each reader first makes the prediction plain (a tensor as
the numbers it holds, text without the quotes around it) and says :class:`Unreadable` when
it cannot read it. These live here, beneath every reader, so that each imports them from
one place and no import goes in a circle.
"""

import numbers
import re


class Unreadable(ValueError):
    """A prediction that cannot be compared with the answer (the verdict shows the format)."""


def _is_number(value):
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _same(value, label):
    """Whether ``value`` is ``label``: True is not 1, 4.0 is 4."""
    if isinstance(value, bool) or isinstance(label, bool):
        return value is label
    return value == label


def _plain(value):
    """A tensor or an array as the numbers it holds; anything else unchanged."""
    if isinstance(value, (str, bytes)) or not hasattr(value, "tolist"):
        return value
    try:
        return value.tolist()
    except Exception:
        return value


def _tidy(text):
    """``text`` without spaces, quotes or backticks around it, or a final full stop."""
    return re.sub(r"^[\s`'\"]+|[\s`'\".]+$", "", text)
