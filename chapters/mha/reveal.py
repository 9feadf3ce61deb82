"""Predict-then-reveal: the reader records a prediction, the reveal cell computes the answer."""

import ast
import numbers
import textwrap


class Unreadable(ValueError):
    """A prediction that cannot be compared with the answer; the message shows the format."""


def _is_number(value):
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _format_of(answer):
    """How a prediction for ``answer`` is written, without giving the answer away."""
    if isinstance(answer, bool):
        return "True or False (without quotes)"
    if isinstance(answer, numbers.Integral):
        return f"a whole number, such as {8 if answer == 7 else 7}"
    if _is_number(answer):
        return f"a number, such as {0.25 if answer == 0.5 else 0.5}"
    if isinstance(answer, str):
        example = "B" if answer.strip().casefold() == "a" else "A"
        return f'text in quotes, such as "{example}"'
    if isinstance(answer, (list, tuple)):
        parts = ", ".join(_format_of(item).split(",")[0] for item in answer)
        return f"a tuple of {len(answer)}: ({parts})"
    return f"a value like the answer's type, {type(answer).__name__}"


def _read(prediction, answer):
    """Whether ``prediction`` means ``answer``; raises :class:`Unreadable` if it cannot tell."""
    if isinstance(prediction, str) and not isinstance(answer, str):
        text = prediction.strip()
        if isinstance(answer, bool):
            if text.casefold() in ("true", "false"):
                return text.casefold() == str(answer).casefold()
            raise Unreadable(_format_of(answer))
        try:
            prediction = ast.literal_eval(text)
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            raise Unreadable(_format_of(answer)) from None
        if isinstance(prediction, str):
            raise Unreadable(_format_of(answer))
    if isinstance(answer, bool) or isinstance(prediction, bool):
        if isinstance(answer, bool) and isinstance(prediction, bool):
            return prediction == answer
        raise Unreadable(_format_of(answer))
    if _is_number(answer):
        if _is_number(prediction):
            return prediction == answer
        raise Unreadable(_format_of(answer))
    if isinstance(answer, str):
        if isinstance(prediction, str):
            return prediction.strip().casefold() == answer.strip().casefold()
        if _is_number(prediction):
            return str(prediction) == answer.strip()
        raise Unreadable(_format_of(answer))
    if isinstance(answer, (list, tuple)):
        if not isinstance(prediction, (list, tuple)):
            raise Unreadable(_format_of(answer))
        if len(prediction) != len(answer):
            return False
        return all(_read(p, a) for p, a in zip(prediction, answer, strict=True))
    return prediction == answer


def prediction_matches(prediction, answer):
    """Whether ``prediction`` says what ``answer`` says, read as a reader means it.

    Text compares without case or surrounding spaces ("b" means "B", "No" means "no"); a number
    matches a number of equal value (4.0 means 4, and "4" means 4); "True" and "False" mean the
    booleans, but 0 and 1 do not; a list matches a tuple element by element. A prediction that
    cannot be read as the answer's kind does not match.
    """
    try:
        return bool(_read(prediction, answer))
    except Unreadable:
        return False
    except Exception:  # an exotic object that cannot even be compared
        return False


def _verdict(prediction, answer, matches):
    """The line that judges the prediction, or says how to write one that can be judged."""
    if matches is None:
        try:
            right = bool(_read(prediction, answer))
        except Exception as error:
            shape = str(error) if isinstance(error, Unreadable) else _format_of(answer)
            return (
                f"Your prediction: {prediction!r}: cannot be read as this answer. "
                f"Write it as {shape}, then re-run."
            )
    else:
        right = matches(prediction, answer)
    verdict = "right" if right else "not what the code computes"
    return f"Your prediction: {prediction!r}: {verdict}."


def reveal(answer, prediction=None, explanation="", *, matches=None):
    """Print the computed ``answer`` next to the reader's ``prediction``.

    ``matches(prediction, answer)`` decides whether the prediction was right (default:
    :func:`prediction_matches`, which also explains a prediction it cannot read);
    ``explanation`` says why the answer is what it is.
    """
    lines = []
    if prediction is None:
        lines.append("Your prediction: none recorded (set the prediction variable above and re-run).")
    else:
        lines.append(_verdict(prediction, answer, matches))
    lines.append(f"Computed answer: {answer}")
    if explanation:
        lines.append(textwrap.fill(" ".join(explanation.split()), width=100))
    print("\n".join(lines))
