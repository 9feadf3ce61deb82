"""Choosing the wrapper's arguments (chapter 2): each exercise's :class:`Target`, the mistakes
(what the answer is, how it was built, how it computes: :data:`.heads.JOINS`) and the check."""

import types
from dataclasses import dataclass

import torch

from .core import CheckResult, Mistake, fill, first_mistake
from .heads import JOINS, is_head
from .wrapper_args import ROLE, Attempt

# fmt: off
ASK = "How many values must each of the {t.heads} heads give? {t.exercise}.hint(1) starts there."
#: Known mistakes, most specific first: the first one recognised is the one the reader hears.
MISTAKES = (
    Mistake("passed the class", "You passed the class {got} itself, not a wrapper built from it: "
            "build one, my_wrapper = MultiHeadAttentionWrapper(...), and pass my_wrapper.",
            lambda a: isinstance(a.answer, type)),
    Mistake("passed a Python module", "You passed the Python module {got}, not a wrapper: import "
            "{got} binds that name. Give your wrapper a name of its own and pass it.",
            lambda a: isinstance(a.answer, types.ModuleType)),
    Mistake("passed a tensor", "You passed a tensor of shape {answer_shape}, probably the "
            "wrapper's output. Pass the wrapper itself: {t.check}(my_wrapper), not "
            "{t.check}(my_wrapper(batch)).",
            lambda a: isinstance(a.answer, torch.Tensor)),
    Mistake("not a module", "{t.check} needs the wrapper you built (a torch.nn.Module), but it was "
            "given {given}.",
            lambda a: a.module is None),
    Mistake("the weight-split class", "A {got} packs its heads into one set of weights (chapter "
            "3's weight splits), and its d_out is the width of the whole output: build a "
            "MultiHeadAttentionWrapper.",
            lambda a: a.heads is None and is_head(a.module) and hasattr(a.module, "num_heads")),
    Mistake("a single head", "This is a single attention head (a {got}), not a wrapper of heads: "
            "build a MultiHeadAttentionWrapper with {t.heads} heads.",
            lambda a: a.heads is None and is_head(a.module)),
    Mistake("not the wrapper", "A {got} has no list of heads (no .heads). Keep the class as it is: "
            "a wrapper.",
            lambda a: not a.heads),
    Mistake("a head that is not an attention head",
            "{not_a_head}, not an attention head with its own W_query, W_key and W_value. " + ROLE,
            lambda a: not all(is_head(h) for h in a.heads)),
    Mistake("a projection reshaped after the call", "Your heads are not as the constructor builds "
            "them: {reshaped}. So the heads were changed after the call; d_out gives every head's "
            "projections one width.",
            lambda a: a.reshaped is not None),
    Mistake("the starting wrapper", "This is the starting wrapper, unchanged: {num_heads} heads "
            "and {width}-dimensional context vectors, where the exercise asks for {t.heads} heads "
            "and {t.width}-dimensional ones. What decides the width of the wrapper's output? "
            "{t.exercise}.hint(1) starts from there.",
            lambda a: a.args_are(2, 2) and a.d_in == 3 and a.context_length == 6),
    Mistake("an answer from earlier in the book",
            "This is {earlier}: {heads_phrase} of width {head_width}, num_heads × d_out = "
            "{num_heads} × {head_width} = {width} values wide. This practice asks for {t.width} "
            "values from {t.heads} heads. " + ASK,
            lambda a: a.earlier is not None),
    Mistake("d_in changed", "Your heads expect tokens {d_in} values wide (d_in={d_in}), but the "
            "example's tokens are 3 wide, batch shape (2, 6, 3): d_in describes the input, keep "
            "d_in=3.",
            lambda a: a.d_in != 3),
    Mistake("num_heads changed", "Your wrapper has {heads_phrase}, but the exercise asks for "
            "{t.heads}: keep num_heads={t.heads}, and set each head's width with d_out.",
            lambda a: a.num_heads != a.t.heads),
    Mistake("one head object repeated", "Two of your heads share one set of weights ({sharing}), "
            "so they always compute the same thing: build one new CausalAttention per head, as the "
            "wrapper does.",
            lambda a: a.sharing is not None),
    Mistake("context_length too short", "context_length={context_length} makes the causal mask "
            "cover only {context_length} tokens, but the example has 6: context_length is the "
            "longest sequence, not the output width; keep it at 6 (or more).",
            lambda a: (a.context_length or 6) < 6),
    JOINS[0],
    Mistake("a head attends to later tokens",
            "Head {leaking} lets tokens attend to later tokens: its causal mask was removed or "
            "altered. " + ROLE,
            lambda a: a.leaking is not None),
    Mistake("columns thrown away", "Your wrapper throws values away: each head computes "
            "{head_width} values per token, and not all reach the output. Make each head narrower "
            "instead: d_out is each head's width.",
            lambda a: a.head_width > 1 and a.drops_columns()),
    Mistake("a head's computation changed",
            "Head {head_fault[0]} no longer computes causal attention as it was built to: "
            "{head_fault[1]}. " + ROLE,
            lambda a: a.head_fault is not None),
    *JOINS[1:],
    Mistake("heads mixed by a projection", "Your output is a weighted mix of the heads' outputs, "
            "as an extra layer after torch.cat makes: a learned mix of heads (chapter 3's "
            "out_proj) blends all heads into every coordinate. Keep the class, and choose each "
            "head's width with d_out.",
            lambda a: a.mixes_heads()),
    Mistake("d_out taken as the total width",
            "You gave d_out={head_width}, the total width you want, but d_out is the width of each "
            "head: num_heads × d_out = {num_heads} × {head_width} = {width}. " + ASK,
            lambda a: a.run.joined() and a.head_width == a.t.width != a.width),
    Mistake("wrong width",
            "Your context vectors are {width}-dimensional, not {t.width}: num_heads × d_out = "
            "{num_heads} × {head_width} = {width}, as d_out is the width of each head. " + ASK,
            lambda a: a.run.joined() and a.width != a.t.width),
)
# fmt: on


@dataclass(frozen=True)
class Target:
    """An exercise's heads and width, and earlier configurations ``(num_heads, d_out, what)``."""

    check: str  # the check's name, as messages quote it
    exercise: str  # the Exercise's name, for hint(1)
    heads: int
    width: int
    earlier: tuple = ()


TWO_DIM = Target("check_two_dim_output", "two_dim_output", heads=2, width=2)
EARLIER = ((3, 2, "chapter 1's running example"), (2, 1, "the first practice's answer"),
           (3, 4, "the answer to chapter 1's question about d_out"))  # fmt: skip
TWELVE_WIDE = Target("check_twelve_wide_output", "twelve_wide_output", 4, 12, EARLIER)


def diagnosis(answer, target):
    """The first catalogued mistake in ``answer`` (with its evidence), or ``None`` if right."""
    return first_mistake(MISTAKES, attempt := Attempt(answer, target)), attempt


def check(answer, target, praise):
    """The verdict on ``answer`` for ``target``: ``praise``, or what is wrong, in words."""
    mistake, attempt = diagnosis(answer, target)
    if mistake is not None:
        return CheckResult(False, mistake.tell(attempt))
    if attempt.is_correct():
        return CheckResult(True, praise)
    unknown = "Your wrapper's output (shape {run.output_shape}) is not its heads' outputs side by "
    unknown += "side, and matches no mistake this check knows. Keep the class's forward as it is."
    return CheckResult(False, fill(unknown, attempt))


def solution(name, d_out, num_heads, check_name):
    """The solution's code: the starting call with the right arguments, and the check."""
    return (
        f"torch.manual_seed(123)\n{name} = MultiHeadAttentionWrapper(\n"
        f"    d_in=3, d_out={d_out}, context_length=6, dropout=0.0, num_heads={num_heads}\n"
        f")\n{check_name}({name})"
    )
