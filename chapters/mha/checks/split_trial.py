"""One run of a reader's weight-split class on one configuration, and the facts it shows.

:class:`SplitTrial` builds the class as the check's configuration says, runs it in eval mode
(twice, to catch randomness left on), remembers the torch functions the forward calls (the last
one tells where it raised), runs it in training mode when the configuration has dropout, and
answers the questions the mistake catalogue of :mod:`.weight_split` asks.
"""

import itertools

import torch

from .classes import torch_attention_message, watching_torch_attention
from .config import Trial, TrialConfig
from .core import evaluating, kind_of, listed
from .reference import CORRECT, PROJECTIONS, Recipe, same, split_attention

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

    def __init__(self, cls, config):
        self.cls, self.config = cls, config
        self.module = self.output = self.again = self.error = None
        self.stage = None  # "constructor" or "forward", when that raised
        self.torch_attention = None  # what of torch's own attention the forward ran
        self.failed = _Calls()  # what the first call in eval mode called
        self.x = config.input()  # (batch, num_tokens, d_in)
        try:
            with torch.random.fork_rng(devices=[]):  # the reader's random state is left alone
                torch.manual_seed(config.seed)
                self.module = cls(**config.kwargs)
                with evaluating(self.module), self.failed, watching_torch_attention() as seen:
                    self.torch_attention = seen
                    self.output = self.module(self.x)
                with evaluating(self.module):
                    torch.manual_seed(config.seed + 1)
                    self.again = self.module(self.x)
        except Exception as error:
            self.stage = "constructor" if self.module is None else "forward"
            self.error = error
        self._head_count = ...  # computed when first asked for

    def expected(self, recipe=CORRECT, num_heads=None):
        """What ``recipe`` computes from this instance's own weights."""
        with evaluating(self.module):
            heads = num_heads or self.config.num_heads
            return split_attention(self.module, self.x, heads, recipe)

    def matches(self, recipe=CORRECT, num_heads=None):
        """Whether the reader's output is what ``recipe`` computes from this instance's weights."""
        if self.error is not None:
            return False
        try:
            return same(self.output, self.expected(recipe, num_heads))
        except Exception:
            return False

    def follows(self, *recipes):
        return any(self.matches(recipe) for recipe in recipes)

    @property
    def passed(self):
        """The output in eval mode is right."""
        return self.matches() and tuple(self.output.shape) == self.expected_shape

    @property
    def accepted(self):
        """Right in eval mode, written without the fused kernel, with dropout in training."""
        return self.passed and not self.uses_fused_kernel and self.dropout_place is None

    @property
    def uses_fused_kernel(self):
        """The forward runs torch's own attention (the fused kernel, or nn.MultiheadAttention),
        which does the chapter's steps."""
        return bool(self.torch_attention)

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
    def random_in_eval(self):
        """Two calls in eval mode gave different outputs: something random is still on."""
        return isinstance(self.output, torch.Tensor) and not same(self.output, self.again)

    @property
    def names(self):
        return listed(self.unusable_projections)

    @property
    def projection_width(self):
        with evaluating(self.module):
            return self.module.W_query(self.x).shape[-1]

    @property
    def hard_coded_head_count(self):
        """The head count the class really uses, when it is not the one it was built with."""
        if self._head_count is ...:
            self._head_count = self._find_hard_coded_head_count()
        return self._head_count

    def _find_hard_coded_head_count(self):
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
    def kind(self):
        return kind_of(self.output)

    @property
    def call(self):
        return self.config.call(self.cls)

    @property
    def c(self):
        return self.config
