"""How a prediction for an answer is written, for a verdict that cannot read the prediction.

A right answer is never called wrong: what :func:`mha.predictions.read` cannot read is
:class:`~mha.prediction_values.Unreadable`, and the verdict then says how to write it
(:func:`format_of`): the choices, or the kind of value with an example. The example is
never the answer itself, so the format does not give the answer away.
"""

import numbers

from .prediction_labels import offered
from .prediction_values import _is_number, _plain, _same


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
