"""Chapter 2's catalogue for both exercises: :class:`.core.Mistake` entries on the evidence
(:class:`.wrapper_args.Attempt`), wrong joins of heads (:data:`JOINS`) as buggy references."""

import types
from dataclasses import dataclass

import torch

from .catalogue import Buggy
from .core import CheckResult, Mistake, first_mistake
from .head_faults import is_head
from .wrapper_args import Attempt

ROLE = "Each head's role must stay as it was: change only the arguments of the call."
ASK = "How many values must each of the {t.heads} heads give? {t.exercise}.hint(1) starts there."
CAT = "torch.cat(..., dim=-1)"

# fmt: off
#: Joining the heads wrongly, most specific first; the evidence has the heads' right outputs.
JOINS = (
    Mistake("heads not given the same x", "Head {fed[0]} was not given the wrapper's input x: it "
            "received {fed[1]}. The heads work side by side, not as a pipeline: every head reads "
            "the same x.", lambda run: run.fed is not None),
    Mistake("forward raises", "Calling your wrapper on a batch of shape {x_shape} raised "
            "{error_text}.", lambda run: run.error is not None),
    Mistake("returns None", "Your forward returned None: did it forget to return its result?",
            lambda run: run.output is None),
    Mistake("returns a list", "Your forward returned {output_kind} of {output_length} tensors, not "
            "one tensor: the heads' outputs still have to be joined into one context vector per "
            "token.", lambda run: isinstance(run.output, (list, tuple))),
    Mistake("returns something else", "Your forward returned {output_kind}, not a tensor of "
            "context vectors.", lambda run: not isinstance(run.output, torch.Tensor)),
    *(Buggy("stacked instead of concatenated", "You used torch.stack, which puts the heads on a "
            f"new axis: the output has shape {{output_shape}}. {CAT} joins them on the last axis, "
            "one vector per token.", lambda run, d=d: torch.stack(run.refs, d)) for d in range(4)),
    *(Buggy("concatenated on the wrong axis", f"You joined the heads' outputs along the {axis} "
            f"(dim={d}), so the output has shape {{output_shape}}: the other heads became extra "
            f"{things}. Concatenate along the last axis, dim=-1.",
            lambda run, d=d: torch.cat(run.refs, d))
      for d, axis, things in ((0, "batch axis", "sequences"), (1, "token axis", "tokens"))),
    *(Buggy("heads added instead of concatenated", f"You {how} the heads' outputs: every "
            f"coordinate blends all heads, and no head's result can be read off. Place them side "
            f"by side: {CAT}.", lambda run, join=join: join(torch.stack(run.refs), 0))
      for how, join in (("added", torch.sum), ("averaged", torch.mean))),
    *(Buggy("heads' columns reordered", f"Every head's values are in your output, but {how}: the "
            "columns are not in head order. Head 1's values come first, then head 2's, and so on.",
            lambda run, join=join: join(run.refs))
      for how, join in (("reversed", lambda refs: torch.cat(refs[::-1], -1)),
                        ("interleaved", lambda refs: torch.stack(refs, -1).flatten(-2)))),
)

#: Known mistakes, most specific first: the first one recognised is the one the reader hears.
MISTAKES = (
    Mistake("passed the class", "You passed the class {got} itself: build a wrapper from it "
            "and pass that.", lambda a: isinstance(a.answer, type)),
    Mistake("passed a Python module", "You passed the Python module {got}: import {got} binds "
            "that name. Pass your wrapper.", lambda a: isinstance(a.answer, types.ModuleType)),
    Mistake("passed a tensor", "You passed a tensor of shape {answer_shape}, probably the "
            "wrapper's output. Pass the wrapper itself: {t.check}(my_wrapper), not "
            "{t.check}(my_wrapper(batch)).", lambda a: isinstance(a.answer, torch.Tensor)),
    Mistake("not a module", "{t.check} needs the wrapper you built (a torch.nn.Module), but it was "
            "given {given}.", lambda a: a.module is None),
    Mistake("the weight-split class", "A {got} packs its heads into one set of weights (chapter "
            "3's weight splits), and its d_out is the width of the whole output: build a "
            "MultiHeadAttentionWrapper.",
            lambda a: a.heads is None and is_head(a.module) and hasattr(a.module, "num_heads")),
    Mistake("a single head", "This is a single attention head (a {got}): build a wrapper with "
            "{t.heads} heads.", lambda a: a.heads is None and is_head(a.module)),
    Mistake("not the wrapper", "A {got} has no list of heads. Keep the class as it is.",
            lambda a: not a.heads),
    Mistake("a head that is not an attention head", "{not_a_head}, not an attention head. " + ROLE,
            lambda a: not all(is_head(h) for h in a.heads)),
    Mistake("a projection reshaped after the call", "Your heads are not as the constructor builds "
            "them: {reshaped}. So the heads were changed after the call.",
            lambda a: a.reshaped is not None),
    Mistake("the starting wrapper", "This is the starting wrapper, unchanged: {num_heads} heads "
            "and {width}-dimensional context vectors, where the exercise asks for {t.heads} heads "
            "and {t.width}-dimensional ones. What decides the width of the wrapper's output? "
            "{t.exercise}.hint(1) starts from there.",
            lambda a: a.args_are(2, 2) and a.d_in == 3 and a.context_length == 6),
    Mistake("an answer from earlier in the book", "This is {earlier}: {heads_phrase} of width "
            "{head_width}. " + ASK, lambda a: a.earlier is not None),
    Mistake("d_in changed", "Your heads expect tokens {d_in} values wide (d_in={d_in}), but the "
            "example's tokens are 3 wide, batch shape (2, 6, 3): d_in describes the input, keep "
            "d_in=3.", lambda a: a.d_in != 3),
    Mistake("num_heads changed", "Your wrapper has {heads_phrase}, but the exercise asks for "
            "{t.heads}: keep num_heads={t.heads}, and set each head's width with d_out.",
            lambda a: a.num_heads != a.t.heads),
    Mistake("one head object repeated", "Two of your heads share one set of weights ({sharing}), "
            "so they always compute the same thing: build one new CausalAttention per head, as the "
            "wrapper does.", lambda a: a.sharing is not None),
    Mistake("context_length too short", "context_length={context_length} makes the causal mask "
            "cover only {context_length} tokens, but the example has 6: context_length is the "
            "longest sequence, not the output width; keep it at 6 (or more).",
            lambda a: a.context_length < 6),
    JOINS[0],
    Mistake("columns thrown away", "Your wrapper throws values away: each head computes "
            "{head_width} values per token, and not all reach the output. Make each head narrower "
            "instead: d_out is each head's width.",
            lambda a: a.head_width > 1 and a.drops_columns()),
    Mistake("a head's computation changed", "Head {head_fault[0]} {head_fault[1]}. " + ROLE,
            lambda a: a.head_fault is not None),
    *JOINS[1:],
    Mistake("heads mixed by a projection", "Your output is a weighted mix of the heads' outputs, "
            "as an extra layer after torch.cat makes: a learned mix of heads (chapter 3's "
            "out_proj) blends all heads into every coordinate. Keep the class, and choose each "
            "head's width with d_out.", lambda a: a.mixes_heads()),
    Mistake("d_out taken as the total width", "d_out={head_width} is the total width you want, "
            "but d_out is each head's width: num_heads × d_out = {num_heads} × {head_width} = "
            "{width}. " + ASK, lambda a: a.joined() and a.head_width == a.t.width != a.width),
    Mistake("wrong width", "Your context vectors are {width}-dimensional, not {t.width}: "
            "num_heads × d_out = {num_heads} × {head_width} = {width}. " + ASK,
            lambda a: a.joined() and a.width != a.t.width),
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


def diagnosis(answer, target):
    """The first catalogued mistake in ``answer`` (with its evidence), or ``None`` if right."""
    return first_mistake(MISTAKES, attempt := Attempt(answer, target)), attempt


def check(answer, target, praise):
    """The verdict on ``answer`` for ``target``: ``praise``, or what is wrong, in words."""
    mistake, attempt = diagnosis(answer, target)
    if mistake is not None:
        return CheckResult(False, mistake.tell(attempt))
    if attempt.args_are(target.heads, target.width // target.heads):
        return CheckResult(True, praise)
    return CheckResult(False, "Your wrapper's output matches no mistake this check knows.")


def solution(name, d_out, num_heads, check_name):
    """The solution's code: the starting call with the right arguments, and the check."""
    return (
        f"torch.manual_seed(123)\n{name} = MultiHeadAttentionWrapper(\n"
        f"    d_in=3, d_out={d_out}, context_length=6, dropout=0.0, num_heads={num_heads}\n"
        f")\n{check_name}({name})"
    )
