"""Predict-then-reveal: the reader records a prediction, the reveal cell computes the answer."""

import textwrap


def reveal(answer, prediction=None, explanation="", *, matches=None):
    """Print the computed ``answer`` next to the reader's ``prediction``.

    ``matches(prediction, answer)`` decides whether the prediction was right (default: ``==``);
    ``explanation`` says why the answer is what it is.
    """
    lines = []
    if prediction is None:
        lines.append("Your prediction: none recorded (set the prediction variable above and re-run).")
    else:
        right = matches(prediction, answer) if matches else prediction == answer
        verdict = "right" if right else "not what the code computes"
        lines.append(f"Your prediction: {prediction!r}: {verdict}.")
    lines.append(f"Computed answer: {answer}")
    if explanation:
        lines.append(textwrap.fill(" ".join(explanation.split()), width=100))
    print("\n".join(lines))
