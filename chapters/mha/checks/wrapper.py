"""Chapter 1's exercise: the wrapper's forward pass, written from a skeleton.

The reader subclasses :class:`WrapperSkeleton` (the list of heads, a ``forward`` that raises)
and writes ``forward``. :func:`check_wrapper` builds the class itself with one, two and three
heads and checks what the chapter teaches: every head receives the same ``x``, the heads run in
list order, and their outputs are joined on the last axis.
"""

import contextlib
from dataclasses import dataclass

import torch
from torch import nn

from ..attention import CausalAttention
from .classes import (
    AnswerFacts,
    Skeleton,
    book_forward_of,
    book_shortcut_message,
    class_answer_mistakes,
    delegation_message,
    watching_book_forwards,
    watching_torch_attention,
)
from .core import (
    CheckResult,
    Exercise,
    Mistake,
    describe_error,
    evaluating,
    first_mistake,
    listed,
    never_raises,
)
from .heads import HeadsRun, is_head
from .reference import same


class WrapperSkeleton(Skeleton):
    """Chapter 1's starting point: ``num_heads`` independent heads, no forward pass yet."""

    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        self.num_heads = num_heads
        self.heads = nn.ModuleList(
            [
                CausalAttention(d_in, d_out, context_length, dropout, qkv_bias)
                for _ in range(num_heads)
            ]
        )


@dataclass(frozen=True)
class WrapperConfig:
    """One way the check builds the reader's class and calls it."""

    d_in: int
    d_out: int
    num_heads: int
    num_tokens: int
    seed: int

    @property
    def kwargs(self):
        return dict(
            d_in=self.d_in,
            d_out=self.d_out,
            context_length=6,
            dropout=0.0,
            num_heads=self.num_heads,
        )

    def call(self, cls):
        arguments = ", ".join(f"{name}={value!r}" for name, value in self.kwargs.items())
        return f"{getattr(cls, '__name__', 'cls')}({arguments})"

    def input(self):
        generator = torch.Generator().manual_seed(500 + self.seed)
        shape = (2, self.num_tokens, self.d_in)
        return torch.rand(shape, generator=generator)  # (b, num_tokens, d_in)


#: Three heads first (chains, order and joins all show there), then two heads with d_in = d_out
#: (a chain then runs without an error), then a single head.
WRAPPER_CONFIGS = (
    WrapperConfig(d_in=3, d_out=2, num_heads=3, num_tokens=6, seed=1),
    WrapperConfig(d_in=4, d_out=4, num_heads=2, num_tokens=5, seed=2),
    WrapperConfig(d_in=5, d_out=3, num_heads=1, num_tokens=4, seed=3),
)


class WrapperTrial(HeadsRun):
    """One run of the reader's class on one configuration."""

    def __init__(self, cls, config):
        self.cls, self.config = cls, config
        self.build_error = None
        module = None
        try:
            with torch.random.fork_rng(devices=[]):  # the reader's random state is left alone
                torch.manual_seed(config.seed)
                module = cls(**config.kwargs)
        except Exception as error:
            self.build_error = error
        super().__init__(module, config.input())

    @property
    def call(self):
        return self.config.call(self.cls)

    @property
    def build_error_text(self):
        return describe_error(self.build_error)

    @property
    def expected_shape(self):
        c = self.config
        return (2, c.num_tokens, c.num_heads * c.d_out)

    @property
    def skipped_heads(self):
        skipped = [str(n) for n in self.skipped]
        return ("head " if len(skipped) == 1 else "heads ") + listed(skipped)

    @property
    def times(self):
        return self.calls[self.repeated - 1]

    @property
    def no_head_called(self):
        """The forward returned a tensor without calling any head as a module, head(x)."""
        return (
            self.error is None
            and isinstance(self.output, torch.Tensor)
            and self.num_heads > 0
            and not any(self.calls)
        )

    def _rerun(self, watch):
        """Run the forward once more, in eval mode, under the context manager ``watch``."""
        with torch.random.fork_rng(devices=[]), evaluating(self.module), watch:
            self.module(self.x)

    @property
    def head_forwards_run(self):
        """How many times a head's forward ran when the wrapper ran once, counted on the
        instances themselves, so that head.forward(x), which skips the hooks, counts too."""
        counted = []

        def counting(head):
            def forward(*args, **kwargs):
                counted.append(head)
                return type(head).forward(head, *args, **kwargs)

            return forward

        try:
            for head in self.heads:
                head.forward = counting(head)
            self._rerun(torch.no_grad())
        finally:
            for head in self.heads:
                vars(head).pop("forward", None)
        return len(counted)

    @property
    def uses_torch_attention(self):
        """What of torch's own attention (the fused kernel, nn.MultiheadAttention) the forward
        ran; see :func:`.classes.watching_torch_attention`."""
        with watching_torch_attention() as seen:
            self._rerun(contextlib.nullcontext())
        return seen

    @property
    def own_attention(self):
        """How a forward that calls no head got its output, in words."""
        seen = self.uses_torch_attention
        if seen.layer:
            how = "hands the heads' queries, keys and values to torch.nn.MultiheadAttention"
        elif seen.kernel:
            how = (
                "hands each head's queries, keys and values to "
                "torch.nn.functional.scaled_dot_product_attention"
            )
        else:
            how = None
        if same(self.output, self.concatenated):
            how = how or "computes each head's attention itself"
            return f"It {how}, and its output does equal the heads' outputs side by side"
        if how is None:
            return "Its output is not the heads' outputs side by side either"
        return f"It {how}, and its output is not the heads' outputs side by side"


#: Known mistakes, most specific first: the first one recognised is the one the reader hears.
NOT_A_CLASS_MISTAKES = class_answer_mistakes("check_wrapper", "MyWrapper")

WRAPPER_MISTAKES = (
    Mistake(
        "constructor raises",
        "Building your class as {call} raised {build_error_text}. Subclass WrapperSkeleton and "
        "leave __init__ to it: the exercise is the forward pass.",
        lambda t: t.build_error is not None,
    ),
    Mistake(
        "no list of heads",
        "Your instance has no list of heads in self.heads, so the check cannot see what each "
        "head does. Subclass WrapperSkeleton, which builds them, and write only forward.",
        lambda t: not t.heads or not all(is_head(h) for h in t.heads),
    ),
    Mistake(
        "the list of heads called",
        "Your forward calls the list of heads itself, and PyTorch raised {error_text}: an "
        "nn.ModuleList holds the heads but computes nothing. Call each head in it on x, and "
        "put their outputs side by side.",
        lambda t: isinstance(t.error, NotImplementedError) and "ModuleList" in str(t.error),
    ),
    Mistake(
        "the starting code",
        "Your forward still raises NotImplementedError: this is the starting code, and the "
        "forward pass is yours to write. What should each head be given, and what becomes of "
        "the heads' outputs? The first hint, just below the check, starts from there.",
        lambda t: isinstance(t.error, NotImplementedError),
    ),
    Mistake(
        "heads chained",
        "Head {fed_head} was given {fed_what}: your heads form a chain, each reading the "
        "previous head's result. The heads work side by side: every head reads the wrapper's "
        "own x, and none sees another head's output.",
        lambda t: t.chained,
    ),
    Mistake(
        "a head not given x",
        "Head {fed_head} was given {fed_what}, not the wrapper's input x. Every head reads the "
        "same x, unchanged.",
        lambda t: t.wrongly_fed is not None,
    ),
    Mistake(
        "head.forward called",
        "Your forward calls each head's forward method, head.forward(x), instead of the head "
        "itself. That runs the head's code but skips what calling a module does: the hooks "
        "that tools (and this check) attach to it. Call the head: head(x).",
        lambda t: t.no_head_called and t.head_forwards_run > 0,
    ),
    Mistake(
        "no head called",
        "Your forward never calls the heads in self.heads: not one head(x) ran. "
        "{own_attention}. This practice is the wrapper itself: it runs each head, one after "
        "another, as the trace above showed, and joins what they return. Let every head "
        "compute its own attention: call head(x) for each head in self.heads.",
        lambda t: t.no_head_called,
    ),
    Mistake(
        "one head used for all",
        "Head {repeated} ran {times} times and {skipped_heads} never ran: one head does the "
        "work of all. Each head has its own weights; call every head in self.heads once.",
        lambda t: t.repeated is not None and t.skipped,
    ),
    Mistake(
        "shared weights",
        "Two of your heads share one set of weights ({sharing}), so they always compute the "
        "same thing. The skeleton builds one new CausalAttention per head: keep its __init__.",
        lambda t: t.sharing is not None,
    ),
    Mistake(
        "a head skipped",
        "With {num_heads} heads, {skipped_heads} never ran. Every head in self.heads must "
        "contribute its output.",
        lambda t: t.error is None and 0 < len(t.skipped) < t.num_heads,
    ),
    Mistake(
        "heads out of order",
        "Your heads ran in the order {run_order}, not in list order. Go through self.heads "
        "from first to last, so that head 1's values come first in the output.",
        lambda t: t.out_of_order,
    ),
    Mistake(
        "forward raises",
        "Calling your forward on a batch of shape {probe_shape} raised {error_text}.",
        lambda t: t.error is not None,
    ),
    Mistake(
        "returns None",
        "Your forward returned None: did it forget to return its result?",
        lambda t: t.output is None,
    ),
    Mistake(
        "returns a list",
        "Your forward returned {output_kind} of {output_length} tensors, not one tensor. The "
        "heads' outputs still have to be joined into one context vector per token.",
        lambda t: isinstance(t.output, (list, tuple)),
    ),
    Mistake(
        "returns something else",
        "Your forward returned {output_kind}, not a tensor of context vectors.",
        lambda t: not isinstance(t.output, torch.Tensor),
    ),
    Mistake(
        "stacked instead of concatenated",
        "You used torch.stack, which puts the heads on a new axis of their own: the output has "
        "shape {output_shape}. torch.cat joins the heads along an existing axis; along the "
        "last one (dim=-1), each token gets one vector holding every head's values.",
        lambda t: t.stack_axis is not None,
    ),
    Mistake(
        "concatenated on the wrong axis",
        "You joined the heads' outputs along the {axis_name} (dim={cat_axis}), so the output "
        "has shape {output_shape}: the other heads' results became extra {axis_things} "
        "instead of longer vectors. Concatenate along the last axis, dim=-1.",
        lambda t: t.cat_axis is not None,
    ),
    Mistake(
        "heads added instead of concatenated",
        "You {combined} the heads' outputs: every coordinate now blends all heads, and no "
        "head's result can be read off. Place them side by side instead, on the last axis.",
        lambda t: t.combined is not None,
    ),
    Mistake(
        "heads' columns reordered",
        "Every head's values are in your output, but {reordered}: the columns are not in head "
        "order. Head 1's values come first, then head 2's, and so on.",
        lambda t: t.reordered is not None,
    ),
)


@never_raises
def check_wrapper(cls):
    """Check chapter 1's exercise: a wrapper class whose forward runs every head on ``x``,
    in list order, and joins their outputs on the last axis."""
    problem = first_mistake(NOT_A_CLASS_MISTAKES, cls)
    if problem:
        return CheckResult(False, problem.tell(AnswerFacts(cls)))
    book = book_forward_of(cls, allowed=(CausalAttention,))
    if book is not None:
        return CheckResult(False, book_shortcut_message(cls, book, "the wrapper's forward"))
    with watching_book_forwards(allowed=(CausalAttention,)) as called:
        for config in WRAPPER_CONFIGS:
            trial = WrapperTrial(cls, config)
            if called:
                return CheckResult(False, delegation_message(cls, called, "the loop over heads"))
            if trial.is_joined_correctly():
                continue
            mistake = first_mistake(WRAPPER_MISTAKES, trial)
            if mistake is None:
                return CheckResult(
                    False,
                    f"Your output is not the heads' outputs side by side (expected shape "
                    f"{trial.expected_shape}), and it matches none of the mistakes this check "
                    f"knows.\n(Seen with {trial.call}.)",
                )
            quiet = mistake.name in ("constructor raises", "the starting code")
            message = mistake.tell(trial) + ("" if quiet else f"\n(Seen with {trial.call}.)")
            return CheckResult(False, message)
    return CheckResult(
        True,
        "With 1, 2 and 3 heads, every head reads the same x, the heads run in list order, and "
        "their outputs sit side by side on the last axis: num_heads × d_out values per token.",
    )


class MyWrapper(WrapperSkeleton):
    def forward(self, x):
        # num_heads tensors, each (b, num_tokens, d_out)
        head_outputs = [head(x) for head in self.heads]
        # (b, num_tokens, num_heads * d_out)
        return torch.cat(head_outputs, dim=-1)


sequential_wrapper = Exercise(
    check_wrapper,
    hints=(
        "The trace showed what each head is given, and in which order the heads run. The "
        "shape prediction showed how the outputs come together. Your forward does the same.",
        "Go through self.heads in order and call each head on the same x. That gives "
        "num_heads tensors of shape (b, num_tokens, d_out); the wrapper returns one tensor of "
        "shape (b, num_tokens, num_heads × d_out).",
        "A list comprehension collects the heads' outputs; torch.cat joins a list of tensors "
        "along an existing axis, and dim=-1 is the last one.",
    ),
    solution_code=MyWrapper,
)
