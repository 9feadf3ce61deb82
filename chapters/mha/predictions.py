"""Reading a prediction as a person grading it would, and saying how to write one.

A reader records a prediction in a code cell however they would write it on paper: "(b)",
"option B", "B (the same x)", "the second one", "No.", "False (worse)", "8,388,608", "four",
"d_out=4", "136 blocks", "(2, 6, 4)", "2-6-4", "2 by 6 by 4", "15/6", or the words of a choice.
A right answer is never called wrong: what cannot be read (a letter or an answer the question
does not offer, "D" of A to C) is unreadable, never wrong. The reveal
(:mod:`mha.reveal`) asks :func:`prediction_matches` whether it says the computed answer. A
prediction that cannot be read as the answer's kind is neither right nor wrong:
:func:`format_of` tells the reader how to write one, naming the answer's type (or the choices
the question offers) without quoting the answer as its example.

A question that offers choices passes them as ``choices``: a dict from each label to the text
of its choice, or a sequence of the answers it offers (see :func:`prediction_matches`).
"""

import ast
import numbers
import operator
import re


class Unreadable(ValueError):
    """A prediction that cannot be compared with the answer (the verdict shows the format)."""


#: Number words a reader may write for a whole number.
NUMBER_WORDS = {
    word: value
    for value, word in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen "
        "fourteen fifteen sixteen seventeen eighteen nineteen twenty".split()
    )
}
_YES = frozenset({"yes", "y", "yeah", "yep", "true"})
_NO = frozenset({"no", "n", "nope", "false"})
#: Digits in groups of three, one separator throughout: 8,388,608, 8 388 608, 8'388'608
#: (and 8.388.608, where two full stops cannot be a decimal point).
_GROUPED = re.compile(r"[+-]?\d{1,3}(?P<sep>[, '_])\d{3}(?:(?P=sep)\d{3})*(?:\.\d+)?")
#: An answer naming choices by letter: "B", or several, "A and C".
_LETTERS = re.compile(r"[A-Z](?:\s*(?:,|&|and)\s*[A-Z])*")
#: What joins several letters in a prediction: "B and C", "B, C", "B & C", "B + C", "B/C".
_JOINS = re.compile(r"\s*(?:,|&|\+|/|\band\b)\s*")
#: A label and the text of its choice together: "B. num_heads * d_out", "(b) 1 GiB",
#: "B (the same x)", '"no" (slower)'.
_LABEL_THEN_TEXT = re.compile(r"\(?\s*[\"'`]?(\w+)[\"'`]?\s*(?:\)\s*|[.:-]\s+|\s+(?=\())(.+)")
_ARITHMETIC = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Pow: operator.pow,
}


def _is_number(value):
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _said(text):
    """``text`` as a reader means it: no case, no runs of spaces, no quotes around it and no
    full stop or exclamation mark after it ("'No.'" says "no")."""
    said = " ".join(str(text).split()).casefold()
    previous = None
    while said != previous:
        previous = said
        said = said.strip("`'\"“”‘’ ").rstrip(".!").strip()
    return said


def _compact(text):
    """``text`` compared as the text of a choice: spaces, backticks and a final full stop do not
    count, and × is the * it stands for ("num_heads × d_out" is "num_heads*d_out")."""
    return "".join(_said(text).replace("`", "").replace("×", "*").split())


def _plain(prediction):
    """A tensor or an array as the numbers it holds; anything else unchanged."""
    if isinstance(prediction, (str, bytes)) or not hasattr(prediction, "tolist"):
        return prediction
    try:
        return prediction.tolist()
    except Exception:
        return prediction


def _yes_no(text):
    """``True`` for a yes ("yes", "Yes!", "no." is ``False``, "No, slower" too), else ``None``."""
    said = _said(text)
    first = re.fullmatch(r"[\"'`]?([a-z]+)[\"'`]?(?:\s*[,;:!.—–(-]\s*.*)?", said)
    word = first.group(1) if first else said
    return True if word in _YES else False if word in _NO else None


def _label(text):
    """``text`` without what a reader writes around a label: "(B)", "b)", "[B]", "option B",
    "answer: B" all give "b"."""
    said = re.sub(r"^(?:option|choice|answer|letter)\b\s*:?\s*", "", _said(text))
    said = re.sub(r"^[(\[*\s]+|[)\]*\s]+$", "", said)  # (b), b), [b], **b**
    return said.rstrip(".:").strip()


def _letters(prediction):
    """The set of letters a prediction names ("B.", "(b)", "B and C", "BC"), or ``None``."""
    if not isinstance(prediction, str):
        return None
    if re.fullmatch(r"[A-Z]{2,}", prediction.strip()):
        return set(prediction.strip())
    said = re.sub(r"^both\s+", "", _said(prediction))
    parts = [_label(part) for part in _JOINS.split(said)]
    if all(re.fullmatch(r"[a-z]", part) for part in parts):
        return {part.upper() for part in parts}
    return None


#: What a reader writes before a number: "d_out=4", "d_out = 4", "all four".
_BEFORE_NUMBER = re.compile(r"(?:[a-z_][\w.]*\s*=|all\s)\s*(.+)")
#: A unit after a number: "136 blocks", "12 columns".
_UNIT_AFTER_NUMBER = re.compile(r"(.+?)\s+([a-z][a-z_ -]*)")
#: Words after a number that change it, so are no unit: "twenty one", "8 million", "4 or 5".
_NOT_UNITS = frozenset(NUMBER_WORDS) | {"hundred", "thousand", "million", "billion", "not", "or"}


def _number(prediction):
    """The number a prediction says: 4, 4.0, "4", "four", "8,388,608", "8 388 608", "2**23",
    and with the words a reader writes around it: "d_out=4", "all four", "136 blocks"."""
    if _is_number(prediction):
        return prediction
    if not isinstance(prediction, str):
        raise Unreadable
    said = _said(prediction)
    for around in (_BEFORE_NUMBER, _UNIT_AFTER_NUMBER):
        inner = around.fullmatch(said)
        if inner and not _NOT_UNITS.intersection(said[inner.end(1) :].split()):
            try:
                return _bare_number(inner.group(1))
            except Unreadable:
                pass
    return _bare_number(said)


def _bare_number(said):
    """The number ``said`` (already :func:`_said`) writes, on its own."""
    if said in NUMBER_WORDS:
        return NUMBER_WORDS[said]
    if _GROUPED.fullmatch(said):
        said = re.sub(r"[, '_]", "", said)
    elif re.fullmatch(r"[+-]?\d{1,3}(?:\.\d{3}){2,}", said):
        said = said.replace(".", "")
    if len(said) > 100:
        raise Unreadable
    try:
        tree = ast.parse(said.replace("^", "**").replace("×", "*"), mode="eval")
        return _evaluate(tree.body)
    except (SyntaxError, ValueError, TypeError, ArithmeticError, RecursionError):
        raise Unreadable from None


def _evaluate(node):
    """The value of a small arithmetic expression of numbers (powers kept small)."""
    if isinstance(node, ast.Constant) and _is_number(node.value):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        value = _evaluate(node.operand)
        return -value if isinstance(node.op, ast.USub) else value
    if isinstance(node, ast.BinOp) and type(node.op) in _ARITHMETIC:
        left, right = _evaluate(node.left), _evaluate(node.right)
        if isinstance(node.op, ast.Pow) and (abs(right) > 64 or abs(left) > 2**20):
            raise ValueError("too large a power")
        return _ARITHMETIC[type(node.op)](left, right)
    raise ValueError("not arithmetic")


def _truth(prediction):
    """The boolean a prediction says: True, "true", "yes", "No." (but 1 and "1" say a number)."""
    if isinstance(prediction, bool):
        return prediction
    if isinstance(prediction, str):
        said = _yes_no(prediction)
        if said is not None:
            return said
    raise Unreadable


def _read_text(prediction, answer):
    """Whether ``prediction`` says the text ``answer``: letters, yes or no, or words."""
    if _LETTERS.fullmatch(answer.strip()):
        named = _letters(prediction)
        if named is None:
            raise Unreadable
        return named == set(re.findall(r"[A-Z]", answer))
    if answer.strip().casefold() in ("yes", "no"):
        said = prediction if isinstance(prediction, bool) else None
        if isinstance(prediction, str):
            said = _yes_no(prediction)
        if said is not None:
            return said == (answer.strip().casefold() == "yes")
    if _is_number(prediction):
        return str(prediction) == answer.strip()
    if isinstance(prediction, str):
        return _said(prediction) == _said(answer)
    raise Unreadable


#: One token of a sequence written as text: a bracket, or what lies between separators.
_TOKEN = re.compile(r"[()\[\]]|[^()\[\],;/&|\s]+")
#: Words and signs that only join the numbers of a shape: "2 by 6 by 4", "2 x 6 x 4".
_JOINING_WORDS = frozenset({"and", "by", "x", "×", "*", "-", "then", "vs", "vs."})
#: Numbers joined into one token: "2-6-4", "2x6x4", "2×6×4".
_JOINED_NUMBERS = re.compile(r"\d+(?:[x×*-]\d+)+")
#: A word that names what a number counts or whose it is: "blocks", "wrapper", "split:".
_NAME_WORD = re.compile(r"[a-z_]+[:=]?")
#: Words that make a sequence of numbers say something else: "not (2, 6, 4)".
_HEDGES = frozenset({"not", "no", "or", "maybe"})


def _items(text, numbers=False):
    """The nested items of a sequence written as text: "(2, 6, 4)", "2 6 4", "2 x 6 x 4",
    "2-6-4", "15/6", "[1, 1, 2, 2], [1, 2, 1, 2]"; each item is left as text for the
    answer's item to read. With ``numbers`` (the answer holds only numbers) the words that
    name them are left out too: "wrapper 15, split 6", "136 blocks"."""
    said = re.sub(r"^(?:torch\.)?size\((.*)\)$", r"\1", _said(text))  # torch.Size([2, 6, 4])
    stack = [[]]
    for token in _TOKEN.findall(said):
        if token in "([":
            stack.append([])
        elif token in ")]":
            if len(stack) == 1:
                raise Unreadable
            inner = stack.pop()
            stack[-1].append(inner)
        elif _JOINED_NUMBERS.fullmatch(token):
            stack[-1].extend(re.split(r"[x×*-]", token))
        elif token in _JOINING_WORDS:
            continue
        elif numbers and token in _HEDGES:
            raise Unreadable
        elif not (numbers and _NAME_WORD.fullmatch(token) and token not in NUMBER_WORDS):
            stack[-1].append(token)
    if len(stack) != 1:
        raise Unreadable
    items = stack[0]
    if numbers and not _leaves(items):
        raise Unreadable  # words only: no number to read
    return items[0] if len(items) == 1 and isinstance(items[0], list) else items


def _leaves(value):
    """The items of a nested sequence, in order, as one flat list."""
    if isinstance(value, (list, tuple)):
        return [leaf for item in value for leaf in _leaves(item)]
    return [value]


def _flat_numbers(items, answer):
    """The numbers ``items`` (from :func:`_items`) say in order, however they are grouped, or
    ``None`` if one of them is no number. Where every number of ``answer`` is one digit, a
    run of digits is read digit by digit ("1122 and 1212")."""
    leaves = _leaves(items)
    digits = all(isinstance(a, int) and 0 <= a <= 9 for a in _leaves(answer))
    if digits and len(leaves) != len(_leaves(answer)):
        runs = [str(leaf) for leaf in leaves]
        if all(re.fullmatch(r"\d+", run) for run in runs):
            return [int(digit) for run in runs for digit in run]
    try:
        return [_number(leaf) for leaf in leaves]
    except Unreadable:
        return None


def _read_sequence(text, answer):
    """Whether the text ``text`` says the sequence ``answer``: as many numbers as the answer
    holds, read in order however they are grouped ("2 6 3 2, 2 3 6 2" for ((2, 6, 3, 2),
    (2, 3, 6, 2))), or else item by item."""
    leaves = _leaves(answer)
    numbers = all(_is_number(leaf) for leaf in leaves)
    items = _items(text, numbers)
    if numbers:
        said = _flat_numbers(items, answer)
        if said is not None and len(said) == len(leaves):
            return said == leaves  # as many numbers as the answer: they say it or they do not
    return _read_as(items, answer)


def _read_as(prediction, answer):
    """Whether ``prediction`` says ``answer``; raises :class:`Unreadable` if it cannot tell."""
    prediction = _plain(prediction)
    if isinstance(answer, bool):
        return _truth(prediction) == answer
    if _is_number(answer):
        if isinstance(prediction, bool):
            raise Unreadable
        return _number(prediction) == answer
    if isinstance(answer, str):
        return _read_text(prediction, answer)
    if isinstance(answer, (list, tuple)):
        if isinstance(prediction, str):
            return _read_sequence(prediction, answer)
        if not isinstance(prediction, (list, tuple)):
            raise Unreadable
        if len(prediction) != len(answer):
            if answer and prediction and all(_same_kind(p, answer[0]) for p in prediction):
                return False  # a sequence of the right kind, of another length
            raise Unreadable
        return all(_read_as(p, a) for p, a in zip(prediction, answer, strict=True))
    return prediction == answer


def _same_kind(prediction, answer):
    """Whether ``prediction`` is an item of ``answer``'s kind that can be read: a sequence for
    a sequence (a list, or text of several tokens), a single value for a single value."""
    if isinstance(answer, (list, tuple)):
        several = isinstance(prediction, str) and len(_TOKEN.findall(prediction)) > 1
        if not (several or isinstance(prediction, (list, tuple))):
            return False
    elif isinstance(prediction, (list, tuple)):
        return False
    return _readable(prediction, answer)


def _readable(prediction, answer):
    """Whether ``prediction`` can be read as a value of ``answer``'s kind."""
    try:
        _read_as(prediction, answer)
    except Exception:
        return False
    return True


def _means(prediction, answer):
    """Whether ``prediction`` says ``answer``, with ``False`` where it cannot be read."""
    try:
        return bool(_read_as(prediction, answer))
    except Exception:
        return False


_NO_CHOICE = object()


def _choice_named(prediction, choices):
    """The label of the choice ``prediction`` names, by its label in any form a reader writes
    it ("B", "(b)", "option B") or by the text of the choice, else ``_NO_CHOICE``.

    A label written with the text of another choice ("A. num_heads * d_out" where that is
    choice B's text) names no choice: raises :class:`Unreadable`.
    """
    for label in choices:
        if _means(prediction, label) or (
            isinstance(prediction, str) and _label(prediction) == _said(label)
        ):
            return label
    for label, text in choices.items():
        if isinstance(text, str) and isinstance(prediction, str):
            if _compact(prediction) == _compact(text):
                return label
        elif text is not None and not isinstance(text, str) and _means(prediction, text):
            return label
    if isinstance(prediction, str):  # the words before a colon: "Nothing" for "Nothing: ..."
        leads = [
            label
            for label, text in choices.items()
            if isinstance(text, str)
            and ":" in text
            and _compact(text.split(":")[0]) == _compact(prediction)
        ]
        if len(leads) == 1:
            return leads[0]
    if isinstance(prediction, str):
        together = _LABEL_THEN_TEXT.fullmatch(_said(prediction))
        if together:
            said_label, said_text = together.groups()
            named = [label for label in choices if _said(label) == said_label]
            meant = [
                label
                for label, text in choices.items()
                if text is not None and _compact(said_text) == _compact(text)
            ]
            if named and (not meant or meant == named):
                return named[0]
            if named and meant:
                raise Unreadable
    return _NO_CHOICE


#: A choice named by its place: "the second one", "second option", "the last".
_ORDINAL = re.compile(
    r"(?:the\s+)?(first|second|third|fourth|fifth|sixth|last)(?:\s+(?:one|option|choice|answer))?"
)
_PLACES = {"first": 0, "second": 1, "third": 2, "fourth": 3, "fifth": 4, "sixth": 5, "last": -1}
#: What a reader writes for "inconclusive", where a question offers it.
_CANNOT_TELL = frozenset(
    {
        "cannot tell",
        "can't tell",
        "can not tell",
        "cannot say",
        "can't say",
        "cannot tell them apart",
        "can't tell them apart",
        "the run cannot tell them apart",
        "unclear",
        "undecided",
        "too close to call",
    }
)


def _by_place_or_synonym(prediction, choices):
    """The choice (a label, or an offered answer) ``prediction`` names by its place ("the
    second one") or, for "inconclusive", in other words ("can't tell"); else ``_NO_CHOICE``."""
    if not isinstance(prediction, str):
        return _NO_CHOICE
    said = _said(prediction).replace("’", "'")
    place = _ORDINAL.fullmatch(said)
    options = list(choices)
    if place and _PLACES[place.group(1)] < len(options):
        return options[_PLACES[place.group(1)]]
    if said in _CANNOT_TELL and "inconclusive" in options:
        return "inconclusive"
    return _NO_CHOICE


def _letters_not_offered(prediction, choices):
    """Whether ``prediction`` names a letter that none of ``choices``' letter labels is ("D"
    where the question offers A to C)."""
    labels = {str(label) for label in choices}
    if not all(re.fullmatch(r"[A-Z]", label) for label in labels):
        return False
    named = _letters(prediction)
    return bool(named) and not named <= labels


def offered(choices):
    """``choices`` as a dict of labels or a tuple of answers; ``None`` if it offers nothing."""
    if not choices:
        return None
    return choices if isinstance(choices, dict) else tuple(choices)


def read(prediction, answer, choices=None):
    """Whether ``prediction`` means ``answer``; raises :class:`Unreadable` if it cannot tell.

    ``choices`` (see :func:`prediction_matches`) are the answers the question offers.
    """
    prediction, choices = _plain(prediction), offered(choices)
    if choices is not None:
        named = _by_place_or_synonym(prediction, choices)
        prediction = prediction if named is _NO_CHOICE else named
    if isinstance(choices, dict):
        label = _choice_named(prediction, choices)
        if label is not _NO_CHOICE:
            return _means(label, answer)
        if _letters_not_offered(prediction, choices):
            raise Unreadable  # a letter the question does not offer
    elif choices is not None:
        for choice in choices:
            if _means(prediction, choice):
                return _means(choice, answer)
        raise Unreadable  # an answer the question does not offer
    if choices is not None and isinstance(answer, str) and not _LETTERS.fullmatch(answer.strip()):
        raise Unreadable  # text that names none of the choices
    return _read_as(prediction, answer)


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
        if _LETTERS.fullmatch(answer.strip()):
            if len(re.findall(r"[A-Z]", answer)) > 1:
                return 'letters in quotes, joined by "and"', 'letters joined by "and"'
            return "a letter in quotes", "letters in quotes"
        if answer.strip().casefold() in ("yes", "no"):
            return '"yes" or "no"', '"yes" or "no" answers'
        return "text in quotes", "texts in quotes"
    if isinstance(answer, (list, tuple)):
        name = "list" if isinstance(answer, list) else "tuple"
        kinds = [_kind(item) for item in answer]
        if not kinds:
            return f"an empty {name}", f"empty {name}s"
        if len(set(kinds)) == 1:
            items = kinds[0][1]
            if len(answer) == 2:
                return f"a pair of {items}", f"pairs of {items}"
            return f"a {name} of {len(answer)} {items}", f"{name}s of {len(answer)} {items}"
        items = " and ".join(filter(None, (", ".join(k[0] for k in kinds[:-1]), kinds[-1][0])))
        return f"a {name} of {len(answer)}: {items}", f"{name}s of {len(answer)}: {items}"
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
    if isinstance(answer, str):
        if not _LETTERS.fullmatch(answer.strip()):
            return None
        several = len(re.findall(r"[A-Z]", answer)) > 1
        return (("A and D", "A and B", "B and D") if several else "ABC")[shift]
    if isinstance(answer, (list, tuple)):
        items = [_example(item, shift, i + 1) for i, item in enumerate(answer)]
        return None if None in items else (list if isinstance(answer, list) else tuple)(items)
    return None


def format_of(answer, choices=None):
    """How a prediction for ``answer`` is written, without quoting the answer as the example."""
    choices = offered(choices)
    if choices:
        said = [_literal(choice) for choice in choices]
        one_of = " or ".join(filter(None, (", ".join(said[:-1]), said[-1])))
        texts = isinstance(choices, dict) and any(t is not None for t in choices.values())
        return f"one of {one_of}" + (" (or the text of a choice)" if texts else "")
    kind = _kind(answer)[0]
    example = next(
        (e for e in (_example(answer, shift) for shift in range(3)) if not _means(e, answer)),
        None,
    )
    return kind if example is None else f"{kind}, such as {_literal(example)}"


def prediction_matches(prediction, answer, choices=None):
    """Whether ``prediction`` says what ``answer`` says, read as a person writes it.

    - Text compares without case, surrounding spaces or quotes, or a final full stop
      ("b" means "B", "No." means "no").
    - A letter answer ("B", or "B and C" for several) reads letters as they are written:
      "B.", "(b)", "b)", "option B"; several as "B and C", "C, B" or "BC".
    - A yes/no question (a True/False answer, or "yes"/"no") reads "yes", "No.", "no, slower",
      "False (worse)", True, "false". 0 and 1 are not booleans.
    - A number matches a number of equal value: 4.0, "4", "four" (number words up to twenty),
      "8,388,608", "8 388 608", "8_388_608", "2**23", and with words around it: "d_out=4",
      "all four", "136 blocks" (but "8 million" and "twenty one" are not read). "4.5" is not 4.
    - A sequence matches item by item, written as a list, a tuple or text ("(2, 6, 4)",
      "2 x 6 x 4", "2-6-4", "2 by 6 by 4", "15/6", "[1, 2], [2, 1]"); text that holds as many
      numbers as the answer is read in order however it groups them ("2 6 3 2, 2 3 6 2"), and
      where every number is one digit, a run of digits is read digit by digit ("1122 and 1212").
    - A choice is named by its label, its text, its place ("the second one"), its label with
      words in brackets ("B (the same x)"), or, for "inconclusive", "can't tell".

    A prediction that cannot be read as the answer's kind does not match.

    ``choices`` is what the question offers, when it offers something: a dict from each label
    to the text of its choice (``{"A": "d_out", "B": "num_heads * d_out"}``: the answer is a
    label, and the text of a choice means its label, so "num_heads * d_out" means "B"), or a
    sequence of the answers it offers (``(1, 2, 3, "spread")``: each of them is a readable
    answer, whatever type the right one has).
    """
    try:
        return bool(read(prediction, answer, choices))
    except Exception:  # unreadable, or an exotic object that cannot even be compared
        return False
