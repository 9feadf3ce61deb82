"""Reading a sequence of numbers and comparing it with the answer: the grammar's second rule.

- A sequence: its numbers, separated by commas, spaces, ``;``, ``/``, ``x``, ``×``, ``*``,
  "by" or "and", grouped or not by round or square brackets, inside ``torch.Size(...)`` or
  not: ``(2, 6, 4)``, ``2 x 6 x 4``, ``((2, 6, 3, 2), (2, 3, 6, 2))``,
  ``[1, 1, 2, 2] and [1, 2, 1, 2]``. As many numbers as the answer holds are compared in
  order, however they are grouped; where every number of the answer is one digit, runs of
  digits are read digit by digit (``1122 and 1212``). Otherwise the items are compared one by
  one: a sequence of the answer's kind but of another length is wrong.

A shape, a pair of shapes or two lists arrive as text or as Python values (tuples, lists,
tensors); both become nested lists here before one comparison judges them. The web page's
text box reads sequences by the same rules (``_static/guess.js``).
"""

import re

from .prediction_numbers import _numeral
from .prediction_values import Unreadable, _is_number, _plain, _tidy

#: One token of a sequence: a number, a bracket, or what separates numbers.
_TOKEN = re.compile(
    r"\s*(?:([0-9]+(?:\.[0-9]+)?)|([()\[\]])|(,|;|/|×|\*|x|by|and|(?:torch\.)?size))\s*"
)


def _sequence_text(text):
    """The numerals ``text`` writes, as nested lists (the grammar's second rule)."""
    said = _tidy(text).lower()
    stack, at = [[]], 0
    while at < len(said):
        found = _TOKEN.match(said, at)
        if found is None or found.end() == at:
            raise Unreadable
        at = found.end()
        numeral, bracket, _ = found.groups()
        if numeral is not None:
            stack[-1].append(numeral)  # kept as text: "0011" may be four digits
        elif bracket in ("(", "["):
            stack.append([])
        elif bracket:
            if len(stack) == 1:
                raise Unreadable
            inner = stack.pop()
            stack[-1].append(inner)
    if len(stack) != 1:
        raise Unreadable
    top = stack[0]
    while len(top) == 1 and isinstance(top[0], list):
        top = top[0]
    return top


def _nested(prediction):
    """``prediction`` (a value, text, or a sequence of either) as nested lists of numbers
    and numerals."""
    if _is_number(prediction):
        return prediction
    if isinstance(prediction, str):
        return _sequence_text(prediction)
    if isinstance(prediction, (list, tuple)):
        return [_nested(_plain(item)) for item in prediction]
    raise Unreadable


def _leaves(value):
    """The items of a nested sequence, in order, as one flat list."""
    if isinstance(value, (list, tuple)):
        return [leaf for item in value for leaf in _leaves(item)]
    return [value]


def _value(leaf):
    """A number, or the number a numeral writes."""
    return _numeral(leaf) if isinstance(leaf, str) else leaf


def _judge(said, answer):
    """Whether ``said`` (from :func:`_nested`) holds the numbers of the sequence ``answer``."""
    if not isinstance(answer, (list, tuple)):
        if isinstance(said, list):
            raise Unreadable
        return _value(said) == answer
    if not isinstance(said, list):
        raise Unreadable
    flat, wanted = _leaves(said), _leaves(answer)
    if not flat:
        raise Unreadable
    one_digit = all(isinstance(a, int) and 0 <= a <= 9 for a in wanted)
    runs = all(isinstance(leaf, str) and leaf.isdigit() for leaf in flat)
    if len(flat) != len(wanted) and one_digit and runs and len("".join(flat)) == len(wanted):
        flat = list("".join(flat))  # runs of digits, read digit by digit
    if len(flat) == len(wanted):
        return [_value(leaf) for leaf in flat] == wanted
    if len(said) != len(answer):
        kind = isinstance(answer[0], (list, tuple)) if answer else False
        if all(isinstance(item, list) == kind for item in said):
            return False  # of the answer's kind, another length
        raise Unreadable
    return all(_judge(item, a) for item, a in zip(said, answer, strict=True))
