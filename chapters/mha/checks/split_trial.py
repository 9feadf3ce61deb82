"""One run of chapter 3's answer (a weight-split class) on one configuration: the right output
and the buggy ones from the instance's own layers (:func:`.reference.split_attention`), where
dropout acts in training mode (:mod:`.dropout`), and the facts the messages quote."""

import itertools
from functools import cached_property

import torch

from .class_answer import TORCH_NAMES, name_of
from .core import describe_error, evaluating, kind_of, listed
from .dropout import dropout_place, dropout_story, training_outputs
from .head_faults import attempt
from .reference import CORRECT, PROJECTIONS, Recipe, same, split_attention
from .shortcuts import Watch

WRONG_PROJECTIONS = [p for p in itertools.product(PROJECTIONS, repeat=3) if p != PROJECTIONS]


class SplitTrial:
    """The reader's class built on ``c`` and called once in eval mode: what it built, returned
    or raised (``stage``: "constructor" or "forward"), and the facts the messages quote."""

    def __init__(self, cls, c, watch):
        self.cls, self.c = cls, c
        self.module = self.output = self.error = self.stage = self.training_error = None
        self.call = f"{name_of(cls)}({', '.join(f'{k}={v!r}' for k, v in c.kwargs.items())})"
        self.x = torch.randn(c.input_shape, generator=torch.Generator().manual_seed(1000 + c.seed))
        try:
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(c.seed)
                self.module = cls(**c.kwargs)
                with evaluating(self.module):
                    self.output = self.module(self.x)
        except Exception as error:
            self.stage = "constructor" if self.module is None else "forward"
            self.error, self.last = error, (watch.failed or ("", []))[:2]  # the failing call
        self.torch_attention = set(watch.seen)

    def expected(self, recipe=CORRECT, num_heads=None):
        """What ``recipe`` computes from this instance's own weights, in eval mode."""
        with evaluating(self.module):
            return split_attention(self.module, self.x, num_heads or self.c.num_heads, recipe)

    def matches(self, recipe=CORRECT, num_heads=None):
        try:
            return self.error is None and same(self.output, self.expected(recipe, num_heads))
        except Exception:
            return False

    right = property(lambda t: t.expected())
    passed = property(lambda t: t.matches() and t.output_shape == t.expected_shape)
    correct = property(lambda t: t.passed and not t.torch_attention and t.dropout_place is None)
    error_text = property(lambda t: describe_error(t.error).rstrip("."))
    training_error_text = property(lambda t: describe_error(t.training_error).rstrip("."))
    kind = property(lambda t: kind_of(t.output))
    expected_shape = property(lambda t: (2, t.c.num_tokens, t.c.d_out))
    output_shape = property(lambda t: tuple(getattr(t.output, "shape", ())) or None)
    names = property(lambda t: listed(t.unusable_projections))
    torch_what = property(
        lambda t: TORCH_NAMES["layer" if "layer" in t.torch_attention else "kernel"]
    )
    dropout_text = property(lambda t: dropout_story(t.dropout_place, BELONGS))

    @cached_property
    def dropout_place(self):
        """Where dropout acts in training mode (:func:`.dropout.dropout_place`), or "raises";
        ``None`` when it drops whole weights, or the configuration has no dropout."""
        if not self.c.dropout or self.error is not None:
            return None
        try:
            outputs = training_outputs(self.module, self.x)
        except Exception as error:
            self.training_error = error
            return "raises"
        if not all(getattr(o, "shape", None) == self.output.shape for o in outputs):
            return "not a tensor"
        return dropout_place(self.module, outputs, self.output, self.c.num_heads, self.c.dropout)

    @property
    def random_in_eval(self):
        """A second call in eval mode, with another seed, gives another output."""
        with evaluating(self.module), torch.random.fork_rng(devices=[]):
            torch.manual_seed(self.c.seed + 1)
            again = self.module(self.x)
            return not torch.allclose(again, self.output, rtol=0, atol=0, equal_nan=True)

    @property
    def unusable_projections(self):
        """The projections the check cannot call on the input, e.g. missing or misnamed."""
        with evaluating(self.module):
            outputs = {n: attempt(lambda n=n: getattr(self.module, n)(self.x)) for n in PROJECTIONS}
        return [n for n, output in outputs.items() if isinstance(output, Exception)]

    @property
    def projection_width(self):
        with evaluating(self.module):
            return self.module.W_query(self.x).shape[-1]

    @property
    def shows_heads_unmerged(self):
        c = self.c
        heads_first = (2, c.num_heads, c.num_tokens, c.head_dim)
        return self.output_shape in {heads_first, (2, c.num_tokens, c.num_heads, c.head_dim)}

    @cached_property
    def hard_coded_head_count(self):
        """The head count the class really uses, when it is not the one it was built with."""
        c = self.c
        for k in (k for k in range(1, c.d_out + 1) if c.d_out % k == 0 and k != c.num_heads):
            if self.matches(num_heads=k):  # right for k heads, with this instance's weights
                return k
        for k in (k for k in range(2, 9) if k != c.num_heads):  # or only works with k heads
            if SplitTrial(self.cls, c._replace(d_out=k * c.head_dim, num_heads=k), Watch()).passed:
                return k
        return None

    @property
    def works_on_full_length_input(self):
        c = self.c
        full = c._replace(num_tokens=c.context_length)
        return c.num_tokens < c.context_length and SplitTrial(self.cls, full, Watch()).passed

    @property
    def keys_transposed_on_heads(self):
        """The failing product multiplied (b, h, t, d) by (b, t, h, d): transpose(1, 2)."""
        name, shapes = self.last
        if self.stage != "forward" or "matmul" not in name or len(shapes) != 2:
            return False
        return len(shapes[0]) == 4 and shapes[1] == tuple(shapes[0][i] for i in (0, 2, 1, 3))

    @property
    def wrong_projection(self):
        """``"the keys come from W_query"``: what the output says about a misused projection."""
        for used in WRONG_PROJECTIONS:
            if self.matches(Recipe(projections=used)):
                roles = zip(("queries", "keys", "values"), used, PROJECTIONS)
                return listed(f"the {role} come from {u}" for role, u, r in roles if u != r)
        return None

    @property
    def largest_difference(self):
        difference = (self.output.double() - self.expected().double()).abs()
        return float(difference.nan_to_num(nan=torch.inf).max())


BELONGS = (
    "Dropout belongs on the attention weights, after the softmax: "
    "attn_weights = self.dropout(attn_weights)."
)
