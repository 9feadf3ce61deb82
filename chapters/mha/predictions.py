"""Reading a reader's prediction: a choice by its label, a typed answer by one small grammar.

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

A number, or a sequence of numbers (a shape, a pair of shapes, two lists), is a Python value
or text in one small grammar, which the web page's text box reads too; the case table
``tests/prediction_cases.json`` holds both readers to the same verdicts.

- A number: ``4``, ``4.0``, ``-3``; digits grouped in threes by commas, spaces, underscores or
  apostrophes, ``8,388,608``, ``8 388 608``, ``8_388_608``; a product or a power of such numbers,
  ``4096 * 2048``, ``4096 × 2048``, ``2**23``, ``2^23``; optionally after a name and ``=``,
  ``d_out = 4``, and before up to three words that name its unit, ``136 blocks``, ``8 bytes
  per token``. A word that scales or hedges the number is not a unit: ``8 million``,
  ``128 MiB``, ``4 or so``, ``4 at most`` are unreadable.
- A sequence: its numbers, separated by commas, spaces, ``;``, ``/``, ``x``, ``×``, ``*``,
  "by" or "and", grouped or not by round or square brackets, inside ``torch.Size(...)`` or
  not: ``(2, 6, 4)``, ``2 x 6 x 4``, ``((2, 6, 3, 2), (2, 3, 6, 2))``,
  ``[1, 1, 2, 2] and [1, 2, 1, 2]``. As many numbers as the answer holds are compared in
  order, however they are grouped; where every number of the answer is one digit, runs of
  digits are read digit by digit (``1122 and 1212``). Otherwise the items are compared one by
  one: a sequence of the answer's kind but of another length is wrong.

Spaces, quotes and backticks around text and a final full stop do not count. A right answer
is never called wrong: what the grammar cannot read (a word, a sign it does not
know, a letter the question does not offer) is :class:`Unreadable`, and the verdict then says
how to write it (:func:`format_of`), without quoting the answer as its example.
"""

import numbers
import re


class Unreadable(ValueError):
    """A prediction that cannot be compared with the answer (the verdict shows the format)."""


#: One numeral: digits, grouped in threes or not, then maybe a decimal part.
_NUMERAL = r"(?:[0-9]{1,3}(?:[,_' \u00a0\u202f][0-9]{3})+|[0-9]+)(?:\.[0-9]*)?"
#: One factor of a number: a sign, a numeral, maybe a power ("**" is written "^" by then).
_FACTOR = re.compile(rf"([+-]?)({_NUMERAL})(?:\s*\^\s*({_NUMERAL}))?")
#: One token of a sequence: a number, a bracket, or what separates numbers.
_TOKEN = re.compile(
    r"\s*(?:([0-9]+(?:\.[0-9]+)?)|([()\[\]])|(,|;|/|×|\*|x|by|and|(?:torch\.)?size))\s*"
)
#: The largest number both readers hold exactly (a JavaScript number is a float64).
_LARGEST = 2**53
#: A number, then one to three words: its unit ("136 blocks", "8 bytes per token").
_UNIT = re.compile(r"(.*?[0-9])\s+([a-z][a-z'-]*(?:\s+[a-z][a-z'-]*){0,2})", re.I)
#: Words after a number that change or hedge it, so it is not what the reader states.
_NOT_A_UNIT = re.compile(
    r"(?:hundred|thousand|million|billion|trillion|dozen|lakh|crore|k|m|g|t|bn|mn|mil|"
    r"[kmgtp]i?b|(?:kilo|mega|giga|tera|peta|kibi|mebi|gibi|tebi)\w*|squared|cubed|percent|"
    r"or|and|nor|not|plus|minus|than|less|more|fewer|over|under|above|below|least|most|"
    r"at|max|min|about|around|roughly|approx\w*|circa|ish|so|nearly|almost|maybe|perhaps)s?",
    re.I,
)


def _is_number(value):
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


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


def _numeral(text):
    """The value of a numeral of :data:`_NUMERAL`."""
    digits = re.sub(r"[,_' \u00a0\u202f]", "", text)
    return float(digits) if "." in digits else int(digits)


def _without_unit(text):
    """``text`` without the words naming its number's unit ("136 blocks": "136")."""
    found = _UNIT.fullmatch(text)
    if found is None or any(_NOT_A_UNIT.fullmatch(w) for w in found.group(2).split()):
        return text
    return found.group(1)


def _number_text(text):
    """The number ``text`` writes (the grammar's first rule), or :class:`Unreadable`."""
    said = re.sub(r"^[A-Za-z_][A-Za-z0-9_]*\s*=\s*", "", _tidy(text))
    said = _without_unit(said).replace("**", "^")
    value = 1
    for factor in re.split(r"\s*[*×]\s*", said):
        found = _FACTOR.fullmatch(factor)
        if found is None:
            raise Unreadable
        sign, base, power = found.groups()
        base = _numeral(base)
        if power is not None:
            power = _numeral(power)
            if power > 64 or power != int(power):
                raise Unreadable
            base = base ** int(power)
        value *= -base if sign == "-" else base
    if not abs(value) <= _LARGEST:
        raise Unreadable
    return value


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


def _same(value, label):
    """Whether ``value`` is ``label``: True is not 1, 4.0 is 4."""
    if isinstance(value, bool) or isinstance(label, bool):
        return value is label
    return value == label


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


def _literal(value):
    """``value`` as a reader would type it in Python (text in double quotes)."""
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, (list, tuple)):
        inner = ", ".join(_literal(item) for item in value)
        if isinstance(value, list):
            return f"[{inner}]"
        return f"({inner},)" if len(value) == 1 else f"({inner})"
    return repr(value)


def _kind(answer):
    """How ``answer`` is written, in words: (one of it, several of it)."""
    if isinstance(answer, bool):
        return "True or False", "True or False values"
    if isinstance(answer, numbers.Integral):
        return "a whole number", "whole numbers"
    if _is_number(answer):
        return "a number", "numbers"
    if isinstance(answer, str):
        return "text in quotes", "texts in quotes"
    if isinstance(answer, (list, tuple)) and answer:
        name = "list" if isinstance(answer, list) else "tuple"
        kinds = {_kind(item) for item in answer}
        if len(kinds) > 1:
            return f"a {name} of {len(answer)}", f"{name}s of {len(answer)}"
        items = kinds.pop()[1]
        if len(answer) == 2:
            return f"a pair of {items}", f"pairs of {items}"
        return f"a {name} of {len(answer)} {items}", f"{name}s of {len(answer)} {items}"
    name = type(answer).__name__
    return f"a value like the answer, a {name}", f"values like the answer, {name}s"


def _example(answer, shift=0, position=0):
    """A value written like ``answer`` that is not the answer, or ``None`` (no good example)."""
    if isinstance(answer, bool):
        return None
    if isinstance(answer, numbers.Integral):
        return position + shift if position else 7 + shift
    if _is_number(answer):
        return 0.5 / (1 + shift)
    if isinstance(answer, (list, tuple)) and answer:
        items = [_example(item, shift, i + 1) for i, item in enumerate(answer)]
        return None if None in items else (list if isinstance(answer, list) else tuple)(items)
    return None


def format_of(answer, choices=None):
    """How a prediction for ``answer`` is written, without quoting the answer as the example."""
    choices = offered(choices)
    if choices:
        said = [_literal(choice) for choice in choices]
        return "one of " + " or ".join(filter(None, (", ".join(said[:-1]), said[-1])))
    answer = _plain(answer)
    kind = _kind(answer)[0]
    example = next(
        (e for e in (_example(answer, shift) for shift in range(3)) if not _same(e, answer)),
        None,
    )
    return kind if example is None else f"{kind}, such as {_literal(example)}"
