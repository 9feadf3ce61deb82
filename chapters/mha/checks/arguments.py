"""Chapter 2's catalogue for both exercises, on the reader's wrapper run on the chapter's batch
(:class:`.argument_attempt.Attempt`), with the mistakes chapter 1 shares (:mod:`.joins`)."""

import torch

from .argument_attempt import Attempt
from .argument_attempt import Target as Target
from .core import CheckResult, Mistake, first_mistake
from .joins import JOINS, NOT_X, SHARED

ASK = "How many values must each of the {t.heads} heads give? {t.exercise}.hint(1) starts there."

#: Known mistakes, most specific first: the first one recognised is the one the reader hears.
MISTAKES = (
    Mistake(
        "passed a tensor",
        "You passed a tensor of shape {answer_shape}, probably the wrapper's output. Pass the "
        "wrapper itself: {t.check}(my_wrapper), not {t.check}(my_wrapper(batch)).",
        lambda a: isinstance(a.answer, torch.Tensor),
    ),
    Mistake(
        "not a module",
        "{t.check} needs the wrapper you built (a torch.nn.Module), but it was given {given}.",
        lambda a: a.module is None,
    ),
    Mistake(
        "not the wrapper",
        "Your {got} does not have the heads MultiHeadAttentionWrapper builds: a list self.heads "
        "of attention heads, each with W_query, W_key and W_value of one width. Build a "
        "MultiHeadAttentionWrapper with {t.heads} heads: change only the arguments of the call.",
        lambda a: not a.heads or not a.as_built(),
    ),
    Mistake(
        "the starting wrapper",
        "This is the starting wrapper, unchanged: {num_heads} heads and {width}-dimensional "
        "context vectors, where the exercise asks for {t.heads} heads and {t.width}-dimensional "
        "ones. What decides the width of the wrapper's output? {t.exercise}.hint(1) starts "
        "from there.",
        lambda a: a.args_are(2, 2) and a.d_in == 3 and a.context_length == 6,
    ),
    Mistake(
        "the input's arguments changed",
        "Your heads take tokens {d_in} values wide (d_in={d_in}), at most {context_length} "
        "(context_length={context_length}), but the example has 6 tokens 3 values wide, batch "
        "shape (2, 6, 3): d_in and context_length describe the input, not the output's width. "
        "Keep d_in=3 and context_length at 6 (or more).",
        lambda a: a.d_in != 3 or a.context_length < 6,
    ),
    Mistake(
        "num_heads changed",
        "Your wrapper has {heads_phrase}, but the exercise asks for {t.heads}: keep "
        "num_heads={t.heads}, and set each head's width with d_out.",
        lambda a: a.num_heads != a.t.heads,
    ),
    SHARED,
    NOT_X,
    *JOINS,
    Mistake(
        "wrong width",
        "Your context vectors are {width}-dimensional, not {t.width}: d_out is each head's "
        "width, so num_heads × d_out = {num_heads} × {head_width} = {width}. " + ASK,
        lambda a: a.joined() and a.width != a.t.width,
    ),
    Mistake(
        "not the heads side by side",
        "Your output is not the heads' outputs side by side: values thrown away, a head's mask, "
        "scale or columns changed, or the heads mixed after torch.cat (a weighted mix, as "
        "chapter 3's learned out_proj makes). Keep the class and its heads as built, and change "
        "only the arguments of the call: d_out is each head's width.",
        lambda a: not a.joined(),
    ),
)


def diagnosis(answer, target):
    """The first catalogued mistake in ``answer`` (with its evidence), or ``None`` if right."""
    return first_mistake(MISTAKES, attempt := Attempt(answer, target)), attempt


def check(answer, target, praise):
    """The verdict on ``answer`` for ``target``: ``praise``, or what is wrong, in words."""
    mistake, attempt = diagnosis(answer, target)
    return CheckResult(mistake is None, mistake.tell(attempt) if mistake else praise)


def solution(name, d_out, num_heads, check_name):
    """The solution's code: the starting call with the right arguments, and the check."""
    return (
        f"torch.manual_seed(123)\n{name} = MultiHeadAttentionWrapper(\n"
        f"    d_in=3, d_out={d_out}, context_length=6, dropout=0.0, num_heads={num_heads}\n"
        f")\n{check_name}({name})"
    )
