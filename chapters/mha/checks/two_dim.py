"""Chapter 2's exercises: choose the wrapper's arguments for a given output width.

The first exercise keeps two heads and asks for two-dimensional context vectors; the second
asks for four heads whose context vectors are twelve values wide. Both start from the same call,
``MultiHeadAttentionWrapper(d_in=3, d_out=2, context_length=6, dropout=0.0, num_heads=2)``,
and keep the class as it is: only the arguments change.

The second target is one no earlier cell of the book builds: chapter 1 runs three heads of
width 2 (six values wide), and asks which d_out gives three heads twelve values. An answer
copied from there, or the first exercise's answer, fails with feedback that names where it
comes from.
"""

import types
from dataclasses import dataclass

import torch

from .catalogue import Buggy
from .core import (
    CheckResult,
    Exercise,
    Mistake,
    fill,
    first_mistake,
    kind_of,
    listed,
    never_raises,
)
from .heads import HeadsRun, find_heads, is_head
from .reference import PROJECTIONS, Recipe, attend, project, same

#: The chapter's example batch: two sequences of six tokens, each token three values wide.
PROBE_SHAPE, PROBE_SEED = (2, 6, 3), 2024
#: The call both exercises start from.
START = dict(d_in=3, d_out=2, context_length=6, num_heads=2)


@dataclass(frozen=True)
class Target:
    """What an exercise asks for: how many heads, and how wide the context vectors are."""

    check: str  # the check's name, as messages quote it
    exercise: str  # the Exercise's name, for hint(1)
    heads: int
    width: int
    #: Configurations the book builds before this exercise, as (num_heads, d_out, what it is):
    #: an answer copied from one of them is named as such.
    earlier: tuple = ()

    @property
    def d_out(self):
        return self.width // self.heads


TWO_DIM = Target("check_two_dim_output", "two_dim_output", heads=2, width=2)
TWELVE_WIDE = Target(
    "check_twelve_wide_output",
    "twelve_wide_output",
    heads=4,
    width=12,
    earlier=(
        (3, 2, "chapter 1's running example"),
        (3, 4, "the answer to chapter 1's question about d_out"),
        (2, 1, "the first practice's answer"),
    ),
)


class TwoDimAttempt(HeadsRun):
    """The evidence about the reader's wrapper, run on a batch shaped like the chapter's."""

    def __init__(self, answer, target=TWO_DIM):
        self.answer, self.target = answer, target
        generator = torch.Generator().manual_seed(PROBE_SEED)
        x = torch.rand(PROBE_SHAPE, generator=generator)  # (b, num_tokens, d_in)
        module = answer if isinstance(answer, torch.nn.Module) else None
        super().__init__(module, x)
        if module is None or find_heads(module) is None:
            self.heads = None

    @property
    def right(self):
        """The correct output: the heads' correct outputs side by side."""
        return self.concatenated  # (b, num_tokens, num_heads * d_out)

    @property
    def got(self):
        answer = self.answer
        return answer.__name__ if isinstance(answer, type) else type(answer).__name__

    @property
    def given(self):
        return kind_of(self.answer)

    @property
    def answer_shape(self):
        return tuple(self.answer.shape)

    @property
    def module_name(self):
        return self.answer.__name__.split(".")[0]

    @property
    def heads_phrase(self):
        return "1 head" if self.num_heads == 1 else f"{self.num_heads} heads"

    @property
    def t(self):
        return self.target

    def is_start(self):
        """The starting call, unchanged: same arguments, and the class's own forward."""
        return (
            self.num_heads == START["num_heads"]
            and self.head_width == START["d_out"]
            and self.d_in == START["d_in"]
            and self.context_length == START["context_length"]
            and self.is_joined_correctly()
        )

    @property
    def earlier_answer(self):
        """What the wrapper is, when it is a configuration the book built before this exercise
        (its own class and forward, the chapter's input), or ``None``."""
        if self.d_in != START["d_in"] or (self.context_length or 0) < PROBE_SHAPE[1]:
            return None
        for heads, d_out, what in self.target.earlier:
            if self.num_heads == heads and self.head_width == d_out:
                return what if self.is_joined_correctly() else None
        return None

    def is_correct(self):
        return (
            self.num_heads == self.target.heads
            and self.reshaped_projections is None
            and self.is_joined_correctly()
            and self.width == self.target.width
        )

    @property
    def reshaped_projections(self):
        """How the heads' projections differ from what the constructor builds, in words, or
        ``None``. The constructor gives every head's W_query, W_key and W_value the same width,
        d_out, and a weight of exactly that many rows."""
        for number, head in enumerate(self.heads, start=1):
            for name in PROJECTIONS:
                layer = getattr(head, name)
                rows = layer.weight.shape[0]
                if rows != layer.out_features:
                    return (
                        f"head {number}'s {name} says out_features={layer.out_features}, but "
                        f"its weight has {rows} row{'s' if rows != 1 else ''}: the weight was "
                        "cut after the layer was built"
                    )
        widths = [tuple(getattr(h, name).out_features for name in PROJECTIONS) for h in self.heads]
        for number, (query, key, value) in enumerate(widths, start=1):
            if not query == key == value:
                return (
                    f"head {number}'s W_query, W_key and W_value are {query}, {key} and {value} "
                    "values wide"
                )
        if len(set(widths)) > 1:
            numbers = listed(str(n) for n in range(1, len(widths) + 1))
            return f"heads {numbers} are {listed(str(w[0]) for w in widths)} values wide"
        return None

    @property
    def changed_how(self):
        """What a head computes instead of causal attention, as precisely as the check can tell."""
        number, own = self.changed
        if isinstance(own, Exception):
            return super().changed_how
        found = _how_a_head_differs(self.heads[number - 1], self.x, own, self.num_heads)
        return found or (
            "its output differs from the softmax of its own queries and keys, causally masked "
            "and scaled by √d_out, applied to its own values"
        )


def _causal_attention(queries, keys, values, scale):
    """Causal attention over ``(b, num_tokens, width)`` tensors, scores divided by ``scale``."""
    return attend(queries, keys, values, Recipe(scale=scale))  # (b, num_tokens, width)


def _how_a_head_differs(head, x, own, num_heads):
    """In words, the one change to causal attention that gives the head's output ``own``, or
    ``None`` when none of the changes tried here explains it."""
    with torch.no_grad():
        queries, keys, values = project(head, x)  # each (b, num_tokens, d_out)
    d_out = keys.shape[-1]
    for kept in range(1, d_out):
        for which, part in (("first", slice(0, kept)), ("last", slice(d_out - kept, d_out))):
            for scale in {kept**0.5, d_out**0.5}:
                sliced = _causal_attention(queries[..., part], keys[..., part], values, scale)
                if same(own, sliced):
                    return (
                        f"it cuts its queries and keys to their {which} {kept} of {d_out} "
                        "columns before the scores. Slicing a projection's output throws away "
                        "what its weights computed; a narrower head comes from a smaller d_out, "
                        "which gives every projection fewer columns"
                    )
    right = f"√d_out = √{d_out}"
    for scale, what in ((1.0, "not scaled"), (d_out, f"divided by d_out = {d_out}")):
        if scale != d_out**0.5 and same(own, _causal_attention(queries, keys, values, scale)):
            return f"its scores are {what}, where causal attention divides them by {right}"
    total, d_in = num_heads * d_out, x.shape[-1]
    for scale, what in (
        (total**0.5, f"√{total}, the square root of the whole output's width (num_heads × d_out)"),
        (d_in**0.5, f"√d_in = √{d_in}, the square root of the input's width"),
    ):
        if scale != d_out**0.5 and same(own, _causal_attention(queries, keys, values, scale)):
            return f"its scores are divided by {what}, where each head divides by its own {right}"
    return None


_KEEP_FORWARD = "torch.cat([head(x) for head in self.heads], dim=-1)"
_CHANGE_ARGUMENTS = "change only the arguments of the MultiHeadAttentionWrapper(...) call"

#: Known mistakes, most specific first: the first one recognised is the one the reader hears.
TWO_DIM_MISTAKES = (
    Mistake(
        "passed the class",
        "You passed the class {got} itself, not a wrapper built from it. Build one, for "
        "example my_wrapper = MultiHeadAttentionWrapper(d_in=3, d_out=..., context_length=6, "
        "dropout=0.0, num_heads=...), and pass my_wrapper.",
        lambda a: isinstance(a.answer, type),
    ),
    Mistake(
        "passed a Python module",
        "You passed the Python module {module_name}, not a wrapper. Perhaps a name you gave "
        "your wrapper was taken over by an import (import {module_name} binds that name). "
        "Give your wrapper a name of its own, such as my_wrapper = "
        "MultiHeadAttentionWrapper(...), and pass it.",
        lambda a: isinstance(a.answer, types.ModuleType),
    ),
    Mistake(
        "passed a tensor",
        "You passed a tensor of shape {answer_shape}, probably the wrapper's output. The check "
        "needs the wrapper itself, to run it on its own inputs and look at its heads: "
        "{t.check}(my_wrapper), not {t.check}(my_wrapper(batch)).",
        lambda a: isinstance(a.answer, torch.Tensor),
    ),
    Mistake(
        "not a module",
        "{t.check} needs the wrapper you built (a torch.nn.Module), but it was given {given}. "
        "Build my_wrapper = MultiHeadAttentionWrapper(...) and pass my_wrapper.",
        lambda a: a.module is None,
    ),
    Mistake(
        "the weight-split class",
        "A {got} keeps its heads packed into one set of weight matrices (the weight splits of "
        "this book's chapter 3), not in a list of separate heads, and its d_out is the width "
        "of the whole output. The exercise keeps the class: build a MultiHeadAttentionWrapper "
        "and change only its arguments.",
        lambda a: a.heads is None and is_head(a.module) and hasattr(a.module, "num_heads"),
    ),
    Mistake(
        "a single head",
        "This is a single attention head (a {got}), not a wrapper of heads. Build a "
        "MultiHeadAttentionWrapper with {t.heads} heads.",
        lambda a: is_head(a.module) and a.heads is None,
    ),
    Mistake(
        "not the wrapper",
        "A {got} has no list of heads (no .heads), so it is not the MultiHeadAttentionWrapper "
        "the exercise asks for. Keep the class as it is and " + _CHANGE_ARGUMENTS + ".",
        lambda a: not a.heads,
    ),
    Mistake(
        "a head that is not an attention head",
        "{not_a_head}, not an attention head with its own W_query, W_key and W_value. Each "
        "head's role must stay as it was: every entry of heads is a CausalAttention, so "
        + _CHANGE_ARGUMENTS
        + ".",
        lambda a: not all(is_head(h) for h in a.heads),
    ),
    Mistake(
        "a projection reshaped after the call",
        "Your heads are not as the constructor builds them: {reshaped_projections}. "
        "MultiHeadAttentionWrapper(...) gives every head's W_query, W_key and W_value the same "
        "width, d_out, so the heads were changed after the call. The exercise lets you "
        "change only the arguments of the call: choose the one width every head gets with "
        "d_out.",
        lambda a: a.reshaped_projections is not None,
    ),
    Mistake(
        "the starting wrapper",
        "This is the starting wrapper, unchanged: {num_heads} heads and {width}-dimensional "
        "context vectors, where the exercise asks for {t.heads} heads and {t.width}-dimensional "
        "ones. What decides the width of the wrapper's output? {t.exercise}.hint(1) starts "
        "from there.",
        lambda a: a.is_start(),
    ),
    Mistake(
        "an answer from earlier in the book",
        "This is {earlier_answer}: {heads_phrase} of width {head_width}, so its context vectors "
        "are num_heads × d_out = {num_heads} × {head_width} = {width} values wide. This "
        "practice asks for {t.width} values from {t.heads} heads, a configuration no earlier "
        "cell builds. How many values must each of the {t.heads} heads give? "
        "{t.exercise}.hint(1) starts from there.",
        lambda a: a.earlier_answer is not None,
    ),
    Mistake(
        "d_in changed",
        "Your heads expect tokens {d_in} values wide (d_in={d_in}), but the tokens of the "
        "example sentence are 3-dimensional, batch shape (2, 6, 3): this wrapper cannot even "
        "run on it. d_in describes the input, not the output: keep d_in=3.",
        lambda a: a.d_in != PROBE_SHAPE[-1],
    ),
    Mistake(
        "num_heads changed",
        "Your wrapper has {heads_phrase}, but the exercise asks for {t.heads}. The number of "
        "heads is how many separate views of the sentence the layer takes, so changing it "
        "changes the layer. Use num_heads={t.heads}, and set each head's width with d_out.",
        lambda a: a.num_heads != a.target.heads,
    ),
    Mistake(
        "one head object repeated",
        "Two of your heads share one set of weights ({sharing}), so they always compute the "
        "same thing: their coordinates are always equal, and training gives both the same "
        "updates, so they never become different. Build each head separately, as the "
        "wrapper's list comprehension does: one new CausalAttention per head.",
        lambda a: a.sharing is not None,
    ),
    Mistake(
        "context_length too short",
        "context_length={context_length} makes the causal mask cover only {context_length} "
        "tokens, but the example sentence has 6, so this wrapper cannot process it. "
        "context_length is the longest sequence the wrapper accepts, not the output width: "
        "keep it at 6 (or more). The output width is set by d_out.",
        lambda a: a.context_length is not None and a.context_length < PROBE_SHAPE[1],
    ),
    Mistake(
        "heads not given the same x",
        "Head {fed_head} was not given the wrapper's input x: it received {fed_what}. Every "
        "head must read the same x; the heads work side by side, not as a pipeline. Pass x to "
        "each head, as in " + _KEEP_FORWARD + ".",
        lambda a: a.wrongly_fed is not None,
    ),
    Mistake(
        "a head attends to later tokens",
        "Head {leaking_head} lets tokens attend to later tokens: its outputs for early tokens "
        "change when a later token changes, so its causal mask was removed or altered. Each "
        "head's role must stay as it was (attention over the current and earlier tokens "
        "only), so " + _CHANGE_ARGUMENTS + ".",
        lambda a: any(a.leaks),
    ),
    Mistake(
        "columns thrown away",
        "Your wrapper makes its output narrower by throwing values away: each head computes "
        "{head_width} values per token, and not all of them reach the output. Every value a "
        "head computes is part of its role. Instead of cutting, make each head compute fewer "
        "values: d_out is each head's width.",
        lambda a: (
            a.head_width > 1 and (a.heads_trim_their_output() or a.output_keeps_some_columns())
        ),
    ),
    Mistake(
        "a head's computation changed",
        "Head {changed_head} no longer computes causal attention as it was built to: "
        "{changed_how}. Each head's role must stay as it was, so " + _CHANGE_ARGUMENTS + ", "
        "not the heads.",
        lambda a: a.changed is not None,
    ),
    Mistake(
        "forward raises",
        "Calling your wrapper on a batch of shape {probe_shape} raised {error_text}. Fix that "
        "first: the wrapper's forward should still end with return " + _KEEP_FORWARD + ".",
        lambda a: a.error is not None,
    ),
    Mistake(
        "returns None",
        "Your wrapper's forward returned None: did it forget to return its result? It should "
        "end with return " + _KEEP_FORWARD + ".",
        lambda a: a.output is None,
    ),
    Mistake(
        "returns a list",
        "Your wrapper returned {output_kind} of {output_length} tensors, not one tensor. The "
        "heads' outputs still have to be joined into one context vector per token: "
        "torch.cat(head_outputs, dim=-1).",
        lambda a: isinstance(a.output, (list, tuple)),
    ),
    Mistake(
        "returns something else",
        "Your wrapper returned {output_kind}, not a tensor of context vectors. Its forward "
        "should end with return " + _KEEP_FORWARD + ".",
        lambda a: not isinstance(a.output, torch.Tensor),
    ),
    *(
        Buggy(
            "stacked instead of concatenated",
            "You used torch.stack, which puts the heads on a new axis of their own: the output "
            "has shape {output_shape} instead of (batch, num_tokens, num_heads × d_out). "
            "torch.cat(head_outputs, dim=-1) joins the heads along the existing last axis, so "
            "that each token gets one vector.",
            lambda a, d=d: torch.stack(a.references, d),
        )
        for d in range(4)
    ),
    *(
        Buggy(
            "concatenated on the wrong axis",
            f"You joined the heads' outputs along the {axis} (dim={d}), so the output has shape "
            "{output_shape}: the other heads' results became extra "
            f"{things} instead of longer vectors. Concatenate along the last axis, dim=-1, so "
            "that each token's vector holds every head's values.",
            lambda a, d=d: torch.cat(a.references, d),
        )
        for d, axis, things in ((0, "batch axis", "sequences"), (1, "token axis", "tokens"))
    ),
    *(
        Buggy(
            "heads added instead of concatenated",
            f"You {how} the heads' outputs. That gives a narrower output, but every coordinate "
            "now blends all heads, and no head's result can be read off. Concatenate instead "
            "(torch.cat(..., dim=-1)) and choose each head's width with d_out.",
            lambda a, join=join: join(torch.stack(a.references), 0),
        )
        for how, join in (("added", torch.sum), ("averaged", torch.mean))
    ),
    *(
        Buggy(
            "heads' columns reordered",
            f"Every head's values are in your output, but {how}: the columns are not in head "
            "order. torch.cat(..., dim=-1) over the heads in list order puts head 1's d_out "
            "values first, then head 2's, and so on, so that each head owns a block of columns.",
            join,
        )
        for how, join in (
            ("reversed", lambda a: torch.cat(a.references[::-1], -1)),
            ("interleaved", lambda a: torch.stack(a.references, -1).flatten(-2)),
        )
    ),
    Mistake(
        "heads' columns reordered",
        "Every head's values are in your output, but {reordered}: the columns are not in head "
        "order. torch.cat(..., dim=-1) over the heads in list order puts head 1's d_out values "
        "first, then head 2's, and so on, so that each head owns a block of columns.",
        lambda a: a.reordered is not None,
    ),
    Mistake(
        "heads mixed by a projection",
        "Your output is a weighted mix of the heads' concatenated outputs, as an extra layer "
        "such as nn.Linear(4, 2) after torch.cat produces. That is a learned mix of heads, the "
        "kind of mixing out_proj does in this book's chapter 3 (there it keeps the width), and "
        "it blends all heads into every coordinate. The exercise keeps the class as it is and "
        "gives each head coordinates of its own: choose each head's width with d_out.",
        lambda a: a.output_mixes_heads(),
    ),
    Mistake(
        "d_out taken as the total width",
        "Your context vectors are {width}-dimensional: you gave d_out={head_width}, the total "
        "width you want, but in the wrapper d_out is the width of each head, and the output is "
        "num_heads × d_out = {num_heads} × {head_width} = {width} wide. How many values must "
        "each of the {t.heads} heads give, then? {t.exercise}.hint(1) starts from there.",
        lambda a: a.is_joined_correctly() and a.head_width == a.target.width != a.width,
    ),
    Mistake(
        "wrong width",
        "Your context vectors are {width}-dimensional, not {t.width}. The wrapper's output "
        "width is num_heads × d_out = {num_heads} × {head_width} = {width}, because d_out is "
        "the width of each head. For {t.width} values from {t.heads} heads, how many values "
        "must each head give? {t.exercise}.hint(1) starts from there.",
        lambda a: a.is_joined_correctly() and a.width != a.target.width,
    ),
)


def _check(wrapper, target, praise):
    attempt = TwoDimAttempt(wrapper, target)
    mistake = first_mistake(TWO_DIM_MISTAKES, attempt)
    if mistake is not None:
        return CheckResult(False, mistake.tell(attempt))
    if attempt.is_correct():
        return CheckResult(True, praise)
    return CheckResult(
        False,
        fill(
            "Your wrapper's output (shape {output_shape}) is not its heads' outputs placed side "
            "by side, and it matches none of the mistakes this check knows. Keep forward as "
            + _KEEP_FORWARD
            + " and "
            + _CHANGE_ARGUMENTS
            + ".",
            attempt,
        ),
    )


@never_raises
def check_two_dim_output(wrapper):
    """Check chapter 2's first exercise: two heads, two-dimensional context vectors.

    ``wrapper`` is the reader's module. The check runs it on a batch shaped like the chapter's,
    ``(2, 6, 3)``, compares the output with what its heads compute, head by head, and names the
    first known mistake it recognises.
    """
    return _check(
        wrapper,
        TWO_DIM,
        "Two heads, each with W_query, W_key and W_value 1 value wide: the context vectors are "
        "2-dimensional (num_heads × d_out = 2 × 1). Each head reads the same x and computes "
        "causal attention from its own weights, and the output holds the heads' values side "
        "by side, in head order.",
    )


@never_raises
def check_twelve_wide_output(wrapper):
    """Check chapter 2's second exercise: four heads, twelve-dimensional context vectors."""
    return _check(
        wrapper,
        TWELVE_WIDE,
        "Four heads, each with W_query, W_key and W_value 3 values wide: the context vectors "
        "are 12-dimensional (num_heads × d_out = 4 × 3). Each head reads the same x and "
        "computes causal attention from its own weights, and the output holds the heads' "
        "values side by side, in head order.",
    )


two_dim_output = Exercise(
    check_two_dim_output,
    hints=(
        "The wrapper's output is num_heads × d_out wide, because every head contributes d_out "
        "values per token. Of those two arguments, which one does the exercise let you change?",
        "num_heads stays 2, so for a width of 2 each head may contribute only one value per "
        "token. Which argument sets the width of each head?",
        "d_out is the width of each head. The other arguments describe the input "
        "(d_in, context_length) or regularise (dropout): keep them as they were.",
    ),
    solution_code=(
        "torch.manual_seed(123)\n"
        "my_wrapper = MultiHeadAttentionWrapper(\n"
        "    d_in=3, d_out=1, context_length=6, dropout=0.0, num_heads=2\n"
        ")\n"
        "check_two_dim_output(my_wrapper)"
    ),
)

twelve_wide_output = Exercise(
    check_twelve_wide_output,
    hints=(
        "Two arguments set the output's width. Which one counts the heads, and which one is "
        "the width of each head?",
        "Twelve values shared by four heads: how many values does each head contribute? "
        "Chapter 1 shared twelve values among three heads; one more head changes each "
        "head's share.",
        "num_heads=4, and d_out is the width of each head, not of the whole output.",
    ),
    solution_code=(
        "torch.manual_seed(123)\n"
        "my_wrapper12 = MultiHeadAttentionWrapper(\n"
        "    d_in=3, d_out=3, context_length=6, dropout=0.0, num_heads=4\n"
        ")\n"
        "check_twelve_wide_output(my_wrapper12)"
    ),
)

__all__ = [
    "TWELVE_WIDE",
    "TWO_DIM",
    "TWO_DIM_MISTAKES",
    "Target",
    "TwoDimAttempt",
    "check_twelve_wide_output",
    "check_two_dim_output",
    "twelve_wide_output",
    "two_dim_output",
]
