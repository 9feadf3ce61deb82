"""One run of chapter 1's answer (a wrapper class) on one configuration, and its mistakes.

:class:`Trial` reads a run of the class (:class:`.runs.Run`, which records the book's forwards
however they were called) and runs it once more with its heads watched; :data:`MISTAKES` names
what went wrong, most specific first.
"""

import torch
from torch import nn

from .arguments import JOINS
from .core import Mistake, listed
from .head_faults import is_head
from .reference import same
from .wrapper_args import Attempt


class Trial(Attempt):
    """Chapter 1's answer on one run (:class:`.runs.Run`: the book's forwards and torch's
    attention it saw), run once more with its heads watched (:attr:`.wrapper_args.Attempt.run`:
    what each head was given, ``calls`` per head, in ``order``); the facts messages quote."""

    def __init__(self, run):
        super().__init__(run.module, None, run.x)
        self.call, self.seen, self.build_error = run.call, run.watch.seen, run.error_text
        self.built = run.stage != "constructor"
        self.forwards = run.calls.count("CausalAttention.forward")  # however they were called
        heads = getattr(self.module, "heads", None)
        self.has_heads = isinstance(heads, nn.ModuleList) and all(is_head(h) for h in heads)

    calls = property(lambda t: [len(inputs) for inputs in t.run[1]])
    order = property(lambda t: t.run[2])
    skipped = property(lambda t: [str(n) for n, c in enumerate(t.calls, 1) if c == 0])
    skipped_heads = property(
        lambda t: "head" + "s" * (len(t.skipped) > 1) + " " + listed(t.skipped)
    )
    repeated = property(lambda t: next((n for n, c in enumerate(t.calls, 1) if c > 1), None))
    times = property(lambda t: t.calls[t.repeated - 1])
    run_order = property(lambda t: ", ".join(str(n + 1) for n in t.order))
    no_head_called = property(lambda t: isinstance(t.output, torch.Tensor) and not any(t.calls))

    @property
    def own_attention(self):
        """How a forward that calls no head got its output, in words."""
        torch_one = (
            "MultiheadAttention"
            if "layer" in self.seen
            else "functional.scaled_dot_product_attention"
        )
        how = "computes each head's attention itself"
        if self.seen & {"kernel", "layer"}:
            how = f"hands each head's queries, keys and values to torch.nn.{torch_one}"
        if same(self.output, self.right):
            return f"It {how}, and its output does equal the heads' outputs side by side"
        if not self.seen:
            return "Its output is not the heads' outputs side by side either"
        return f"It {how}, and its output is not the heads' outputs side by side"


# fmt: off
STARTING = ("Your forward still raises NotImplementedError: this is the starting code, and the "
            "forward pass is yours to write. What should each head be given, and what becomes of "
            "the heads' outputs? The first hint, just below the check, starts from there.")
#: Known mistakes, most specific first: the first one recognised is the one the reader hears.
MISTAKES = (
    Mistake("constructor raises", "Building your class as {call} raised {build_error}. Subclass "
            "WrapperSkeleton and leave __init__ to it: the exercise is the forward pass.",
            lambda t: not t.built),
    Mistake("no list of heads", "Your instance has no list of heads in self.heads: subclass "
            "WrapperSkeleton, which builds them, and write only forward.",
            lambda t: not t.has_heads or not t.heads),
    Mistake("the list of heads called", "Your forward calls the list of heads itself, and PyTorch "
            "raised {error_text}: an nn.ModuleList holds the heads but computes nothing. Call each "
            "head in it on x.",
            lambda t: isinstance(t.error, NotImplementedError) and "ModuleList" in str(t.error)),
    Mistake("the starting code", STARTING, lambda t: isinstance(t.error, NotImplementedError)),
    JOINS[0],
    Mistake("head.forward called", "Your forward calls head.forward(x) instead of the head itself, "
            "which skips what calling a module does (its hooks, which tools and this check use): "
            "call head(x).",
            lambda t: t.no_head_called and t.forwards > 0),
    Mistake("no head called", "Your forward never calls the heads in self.heads: not one head(x) "
            "ran. {own_attention}. This practice is the wrapper itself: call head(x) for each head "
            "in self.heads.",
            lambda t: t.no_head_called),
    Mistake("one head used for all", "Head {repeated} ran {times} times and {skipped_heads} never "
            "ran: one head does the work of all. Call every head in self.heads once.",
            lambda t: t.repeated is not None and t.skipped),
    Mistake("shared weights", "Two of your heads share one set of weights ({sharing}): keep the "
            "skeleton's __init__, which builds one new CausalAttention per head.",
            lambda t: t.sharing is not None),
    Mistake("a head skipped", "With {num_heads} heads, {skipped_heads} never ran: every head must "
            "contribute.",
            lambda t: t.error is None and 0 < len(t.skipped) < t.num_heads),
    Mistake("heads out of order", "Your heads ran in the order {run_order}, not in list order: go "
            "through self.heads from first to last, so that head 1's values come first.",
            lambda t: t.order != sorted(t.order)),
    *JOINS[1:],
)
UNKNOWN = Mistake("unknown", "Your output is not the heads' outputs side by side, and it matches "
                  "none of the mistakes this check knows.", lambda t: True)
# fmt: on
