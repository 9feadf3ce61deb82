"""One run of a reader's weight-split class on one configuration, and the facts it shows.

:class:`SplitTrial` runs the class in eval mode, remembers the torch functions the forward
calls (the last one tells where it raised) and the book's code it ran, runs it in training
mode when the configuration has dropout, and answers what :mod:`.weight_split` asks.
"""

import itertools
from functools import cached_property

import torch

from .classes import delegation_message, torch_attention_message, watching_book_forwards
from .config import Trial, TrialConfig
from .core import evaluating, listed
from .reference import CORRECT, PROJECTIONS, Recipe, split_attention

#: The configurations the check runs, in order. The first has several heads and a full-length
#: input, so most mistakes show there; the others add a shorter input than the mask, one head,
#: d_in larger than d_out, head_dim 1, biases in the projections, and dropout (off in eval mode).
WEIGHT_SPLIT_CONFIGS = (
    TrialConfig(d_in=5, d_out=12, context_length=6, num_heads=3, num_tokens=6, seed=1),
    TrialConfig(d_in=6, d_out=8, context_length=8, num_heads=2, num_tokens=5, seed=2),
    TrialConfig(d_in=4, d_out=6, context_length=5, num_heads=1, num_tokens=5, seed=3),
    TrialConfig(d_in=3, d_out=8, context_length=7, num_heads=4, num_tokens=3, seed=4),
    TrialConfig(d_in=10, d_out=6, context_length=4, num_heads=6, num_tokens=4, seed=5),
    TrialConfig(
        d_in=4, d_out=6, context_length=6, num_heads=3, num_tokens=6, qkv_bias=True, seed=6
    ),
    TrialConfig(d_in=3, d_out=4, context_length=5, num_heads=2, num_tokens=5, dropout=0.5, seed=7),
)

#: Every way of taking the queries, keys and values from the three projections but the right one.
WRONG_PROJECTIONS = tuple(p for p in itertools.product(PROJECTIONS, repeat=3) if p != PROJECTIONS)


class _Calls(torch.overrides.TorchFunctionMode):
    """Remembers the names of the torch functions called, and the last one's tensor shapes."""

    def __init__(self):
        super().__init__()
        self.name, self.shapes, self.names = None, [], set()

    def __torch_function__(self, func, types, args=(), kwargs=None):
        self.name = getattr(func, "__name__", "")
        self.names.add(self.name)
        self.shapes = [tuple(a.shape) for a in args if isinstance(a, torch.Tensor)]
        return func(*args, **(kwargs or {}))


class SplitTrial(Trial):
    """One run of the reader's class on one configuration: what it built, returned or raised."""

    def watch(self, stack):
        super().watch(stack)
        self.failed = stack.enter_context(_Calls())  # the torch functions the call ran
        self.book_calls = stack.enter_context(watching_book_forwards())

    def expected(self, recipe=CORRECT, num_heads=None):
        """What ``recipe`` computes from this instance's own weights."""
        with evaluating(self.module):
            heads = num_heads or self.config.num_heads
            return split_attention(self.module, self.x, heads, recipe)

    def matches(self, recipe=CORRECT, num_heads=None):
        """Whether the reader's output is what ``recipe`` computes from this instance's weights."""
        return self.gives(lambda *_: self.expected(recipe, num_heads))

    def follows(self, *recipes):
        return any(self.matches(recipe) for recipe in recipes)

    @property
    def passed(self):
        """The output in eval mode is right."""
        return self.matches() and tuple(self.output.shape) == self.expected_shape

    @property
    def correct(self):
        """Right in eval mode, written without torch's attention or the book's, with dropout in
        training."""
        return (
            self.passed
            and not self.torch_attention
            and not self.book_calls
            and self.dropout_place is None
        )

    @property
    def delegation(self):
        return delegation_message(self.cls, self.book_calls, "the weight split")

    @property
    def torch_attention_text(self):
        """What torch's attention does, and what to write here instead."""
        here = "write the steps with @, masked_fill and torch.softmax."
        return torch_attention_message(self.torch_attention, here)

    @property
    def sdpa_mask_note(self):
        """A word on the kernel's mask, when the reader gave it the causal mask itself."""
        if not self.follows(CORRECT.but(mask="keep-mask to sdpa")):
            return ""
        return (
            " (A note for chapter 5: for that function a bool attn_mask marks the keys to "
            "*keep*, the opposite of masked_fill, so the causal mask given as attn_mask lets "
            "each token see only later tokens.)"
        )

    @property
    def projection_width(self):
        with evaluating(self.module):
            return self.module.W_query(self.x).shape[-1]

    @cached_property
    def hard_coded_head_count(self):
        """The head count the class really uses, when it is not the one it was built with."""
        config = self.config
        d_out = config.d_out
        others = [k for k in range(1, d_out + 1) if d_out % k == 0 and k != config.num_heads]
        for k in others:  # the output is right for k heads, with this instance's weights
            if self.matches(num_heads=k):
                return k
        for k in range(2, 9):  # or the class only works when built with k heads
            if k != config.num_heads and SplitTrial(self.cls, config.with_heads(k)).passed:
                return k
        return None

    @property
    def works_on_full_length_input(self):
        return self.config.num_tokens < self.config.context_length and (
            SplitTrial(self.cls, self.config.full_length()).passed
        )

    @property
    def keys_transposed_on_heads(self):
        """The failing product multiplied (b, h, t, d) by (b, t, h, d): transpose(1, 2)."""
        if self.stage != "forward" or "matmul" not in (self.failed.name or ""):
            return False
        if len(self.failed.shapes) != 2 or len(self.failed.shapes[0]) != 4:
            return False
        (b, h, t, d), other = self.failed.shapes
        return other == (b, t, h, d)

    @property
    def view_not_contiguous(self):
        return self.stage == "forward" and "view size is not compatible" in str(self.error)

    @property
    def wrong_projection(self):
        """``"keys come from W_query"``: what the output says about a misused projection."""
        for used in WRONG_PROJECTIONS:
            if self.matches(Recipe(projections=used)):
                roles = ("queries", "keys", "values")
                wrong = [
                    f"the {role} come from {name}"
                    for role, name, right in zip(roles, used, PROJECTIONS, strict=False)
                    if name != right
                ]
                return listed(wrong)
        return None

    @property
    def c(self):
        return self.config
