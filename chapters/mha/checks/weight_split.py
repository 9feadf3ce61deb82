"""Chapter 3's exercise: a forward pass with weight splits."""

import textwrap
from dataclasses import dataclass

import torch

from .core import CheckResult, Exercise, Mistake, describe_error, evaluating, first_mistake, never_raises

PROJECTIONS = ("W_query", "W_key", "W_value")


@dataclass(frozen=True)
class SplitConfig:
    """One way the check builds the reader's class and calls it: sizes, head count, input length."""

    d_in: int
    d_out: int
    context_length: int
    num_heads: int
    num_tokens: int
    batch: int = 2
    seed: int = 0

    @property
    def head_dim(self):
        return self.d_out // self.num_heads

    @property
    def kwargs(self):
        return dict(d_in=self.d_in, d_out=self.d_out, context_length=self.context_length,
                    dropout=0.0, num_heads=self.num_heads)

    @property
    def input_shape(self):
        return (self.batch, self.num_tokens, self.d_in)

    def call(self, cls):
        """How the check builds ``cls``, written as the reader would type it."""
        arguments = ", ".join(f"{name}={value!r}" for name, value in self.kwargs.items())
        return f"{getattr(cls, '__name__', 'cls')}({arguments})"

    def input(self):
        """A seeded random input, drawn without touching the reader's global random state."""
        generator = torch.Generator().manual_seed(1000 + self.seed)
        return torch.randn(*self.input_shape, generator=generator)  # (batch, num_tokens, d_in)

    def full_length(self):
        """The same configuration with an input exactly ``context_length`` tokens long."""
        return SplitConfig(self.d_in, self.d_out, self.context_length, self.num_heads,
                           self.context_length, self.batch, self.seed)

    def with_heads(self, num_heads):
        """The same configuration with another head count and the same ``head_dim``."""
        return SplitConfig(self.d_in, num_heads * self.head_dim, self.context_length, num_heads,
                           self.num_tokens, self.batch, self.seed)


#: The configurations the check runs, in order. The first has several heads and a full-length
#: input, so most mistakes show there; the others add a shorter input than the mask, one head,
#: d_in larger than d_out and head_dim 1. Every one has d_in != d_out.
WEIGHT_SPLIT_CONFIGS = (
    SplitConfig(d_in=5, d_out=12, context_length=6, num_heads=3, num_tokens=6, seed=1),
    SplitConfig(d_in=6, d_out=8, context_length=8, num_heads=2, num_tokens=5, seed=2),
    SplitConfig(d_in=4, d_out=6, context_length=5, num_heads=1, num_tokens=5, seed=3),
    SplitConfig(d_in=3, d_out=8, context_length=7, num_heads=4, num_tokens=3, seed=4),
    SplitConfig(d_in=10, d_out=6, context_length=4, num_heads=6, num_tokens=4, seed=5),
)


@dataclass(frozen=True)
class SplitRecipe:
    """How a weight-split forward pass computes its output from a module's own layers.

    The defaults are the correct pass; each mistake in the catalogue changes one ingredient.
    """

    split_transposes: bool = True  # view to (b, num_tokens, num_heads, head_dim), then transpose(1, 2)
    merge_transposes: bool = True  # transpose(1, 2) back before merging the heads
    scale_by: str = "head_dim"  # the scores are divided by √head_dim; or "d_out", or "nothing"
    causal_mask: str = "-inf before softmax"  # or "none", "0 before softmax", "0 after softmax", "-inf after softmax"
    softmax_dim: int = -1  # each query's weights sum to 1 over the keys
    out_proj: bool = True  # apply the module's out_proj, when it has one


CORRECT_SPLIT = SplitRecipe()


def split_attention(module, x, num_heads, recipe=CORRECT_SPLIT):
    """The output of a weight-split pass over ``module``'s W_query/W_key/W_value (and out_proj), per ``recipe``."""
    b, num_tokens, _ = x.shape
    queries, keys, values = (
        _split(getattr(module, name)(x), num_heads, recipe.split_transposes) for name in PROJECTIONS
    )  # each (b, num_heads, num_tokens, head_dim)
    head_dim = queries.shape[-1]
    scale = {"head_dim": head_dim, "d_out": num_heads * head_dim, "nothing": 1}[recipe.scale_by] ** 0.5
    future = torch.ones(num_tokens, num_tokens, dtype=torch.bool, device=x.device).triu(1)

    attn_scores = queries @ keys.transpose(2, 3)  # (b, num_heads, num_tokens, num_tokens)
    if recipe.causal_mask.endswith("before softmax"):
        attn_scores = attn_scores.masked_fill(future, 0.0 if recipe.causal_mask.startswith("0") else -torch.inf)
    attn_weights = torch.softmax(attn_scores / scale, dim=recipe.softmax_dim)
    if recipe.causal_mask.endswith("after softmax"):
        attn_weights = attn_weights.masked_fill(future, 0.0 if recipe.causal_mask.startswith("0") else -torch.inf)

    context = _merge(attn_weights @ values, recipe.merge_transposes)  # (b, num_tokens, d_out)
    out_proj = getattr(module, "out_proj", None)
    return out_proj(context) if recipe.out_proj and out_proj is not None else context


def _split(t, num_heads, transposes):
    """``(b, num_tokens, d_out)`` → ``(b, num_heads, num_tokens, head_dim)``, right or the mistaken way."""
    b, num_tokens, d_out = t.shape
    if transposes:
        return t.reshape(b, num_tokens, num_heads, d_out // num_heads).transpose(1, 2)
    return t.reshape(b, num_heads, num_tokens, d_out // num_heads)  # mixes tokens and heads


def _merge(context, transposes):
    """``(b, num_heads, num_tokens, head_dim)`` → ``(b, num_tokens, d_out)``, right or the mistaken way."""
    b, num_heads, num_tokens, head_dim = context.shape
    if transposes:
        context = context.transpose(1, 2)  # (b, num_tokens, num_heads, head_dim)
    return context.reshape(b, num_tokens, num_heads * head_dim)


def _same(output, expected):
    """Equal up to float32 rounding, with nan where the expected output has nan."""
    return (
        isinstance(output, torch.Tensor)
        and output.shape == expected.shape
        and output.is_floating_point()
        and torch.allclose(output.double(), expected.double(), rtol=1e-4, atol=1e-5, equal_nan=True)
    )


class SplitTrial:
    """One run of the reader's class on one configuration: what it built, and what it returned or raised."""

    def __init__(self, cls, config):
        self.cls, self.config = cls, config
        self.module = self.output = self.error = None
        self.stage = None  # "constructor" or "forward", when that raised
        self.x = config.input()  # (batch, num_tokens, d_in)
        try:
            with torch.random.fork_rng(devices=[]):  # seeded, and the reader's random state is left alone
                torch.manual_seed(config.seed)
                self.module = cls(**config.kwargs)
            with evaluating(self.module):
                self.output = self.module(self.x)
        except Exception as error:
            self.stage = "constructor" if self.module is None else "forward"
            self.error = error
        self._head_count = ...  # computed when first asked for

    def expected(self, recipe=CORRECT_SPLIT, num_heads=None):
        """What ``recipe`` computes from this instance's own weights."""
        with evaluating(self.module):
            return split_attention(self.module, self.x, num_heads or self.config.num_heads, recipe)

    def matches(self, recipe=CORRECT_SPLIT, num_heads=None):
        """Whether the reader's output is what ``recipe`` computes from this instance's weights."""
        if self.error is not None:
            return False
        try:
            return _same(self.output, self.expected(recipe, num_heads))
        except Exception:
            return False

    @property
    def passed(self):
        return self.matches() and tuple(self.output.shape) == self.expected_shape

    @property
    def unusable_projections(self):
        """The projections the check cannot call on the input, e.g. missing or misnamed."""
        unusable = []
        for name in PROJECTIONS:
            try:
                with evaluating(self.module):
                    getattr(self.module, name)(self.x)
            except Exception:
                unusable.append(name)
        return unusable

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
        others = [k for k in range(1, config.d_out + 1) if config.d_out % k == 0 and k != config.num_heads]
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
    def expected_shape(self):
        return (self.config.batch, self.config.num_tokens, self.config.d_out)

    @property
    def output_shape(self):
        return tuple(self.output.shape)

    @property
    def shows_heads_unmerged(self):
        c = self.config
        return self.output_shape in {(c.batch, c.num_heads, c.num_tokens, c.head_dim),
                                     (c.batch, c.num_tokens, c.num_heads, c.head_dim)}

    @property
    def largest_difference(self):
        return float((self.output.double() - self.expected().double()).abs().max())

    @property
    def error_text(self):
        return describe_error(self.error).rstrip(".")  # the message goes on with its own full stop

    @property
    def call(self):
        return self.config.call(self.cls)


def _output_follows(*recipes):
    """A detector: the reader's output is what one of ``recipes`` computes from the instance's weights."""
    return lambda trial: any(trial.matches(recipe) for recipe in recipes)


NOT_A_CLASS_MISTAKES = (
    Mistake(
        "nothing passed",
        "check_weight_split got None. Run the cell that defines your class, then pass the class "
        "itself: check_weight_split(MyWeightSplit).",
        lambda answer: answer is None,
    ),
    Mistake(
        "an instance instead of the class",
        "You passed an instance of {name}, not the class. Pass the class itself, "
        "check_weight_split({name}): the check builds its own instances with several head counts.",
        lambda answer: isinstance(answer, torch.nn.Module),
    ),
    Mistake(
        "not a class",
        "check_weight_split expects a class, but got {kind}. Pass the class you defined with "
        "class ...(nn.Module): by its name, without calling it.",
        lambda answer: not isinstance(answer, type),
    ),
    Mistake(
        "not an nn.Module",
        "{name} is a class, but not an nn.Module. Start its definition with class {name}(nn.Module): "
        "(or subclass MultiHeadAttention), so that it holds layers and can be called on a tensor.",
        lambda answer: not issubclass(answer, torch.nn.Module),
    ),
)

WEIGHT_SPLIT_MISTAKES = (
    Mistake(
        "constructor raises",
        "Building your class as {t.call} raised {t.error_text}. Its constructor must accept d_in, "
        "d_out, context_length, dropout and num_heads as keyword arguments and call "
        "super().__init__() first, as MultiHeadAttention's does.",
        lambda t: t.stage == "constructor",
    ),
    Mistake(
        "projections missing",
        "The check could not use your instance's {names}. It computes the expected output from the "
        "instance's own W_query, W_key and W_value, so keep those names: layers that map "
        "(b, num_tokens, d_in) to (b, num_tokens, d_out), such as nn.Linear(d_in, d_out).",
        lambda t: t.unusable_projections,
    ),
    Mistake(
        "d_out taken per head",
        "Your W_query maps d_in={t.config.d_in} to width {t.projection_width}, but here d_out="
        "{t.config.d_out} is the total width of all heads together: each projection is "
        "nn.Linear(d_in, d_out), and each head takes a block of head_dim = d_out // num_heads = "
        "{t.config.head_dim} columns. (In the wrapper, d_out was the width of each head.)",
        lambda t: t.projection_width != t.config.d_out,
    ),
    Mistake(
        "mask not sliced",
        "Your forward works on an input of context_length={t.config.context_length} tokens, but on "
        "{t.config.num_tokens} tokens it raised {t.error_text}. The mask buffer is context_length × "
        "context_length: slice it to the input's length, self.mask.bool()[:num_tokens, :num_tokens], "
        "before masked_fill.",
        lambda t: t.stage == "forward" and t.works_on_full_length_input,
    ),
    Mistake(
        "head count hard-coded",
        "Built with num_heads={t.config.num_heads}, your class computes as if it had "
        "{t.hard_coded_head_count} heads: the head count seems to be written into the code. Take it "
        "from the constructor's argument, and use self.num_heads and self.head_dim everywhere.",
        lambda t: t.hard_coded_head_count is not None,
    ),
    Mistake(
        "forward raises",
        "Calling your forward on an input of shape {t.config.input_shape} raised {t.error_text}.",
        lambda t: t.stage == "forward",
    ),
    Mistake(
        "not a tensor",
        "Your forward returned {kind}, not a tensor. Return the context vectors: a tensor of shape "
        "(b, num_tokens, d_out), here {t.expected_shape}.",
        lambda t: not isinstance(t.output, torch.Tensor),
    ),
    Mistake(
        "heads not merged",
        "Your forward returned shape {t.output_shape}: the heads are still separate. Transpose the "
        "context back to (b, num_tokens, num_heads, head_dim) and merge the last two axes with "
        ".contiguous().view(b, num_tokens, d_out), which gives {t.expected_shape}.",
        lambda t: t.shows_heads_unmerged,
    ),
    Mistake(
        "wrong shape",
        "Your forward returned shape {t.output_shape}, but it should be (b, num_tokens, d_out), "
        "here {t.expected_shape}.",
        lambda t: t.output_shape != t.expected_shape,
    ),
    Mistake(
        "view without transpose",
        "Your heads are split with one view straight to (b, num_heads, num_tokens, head_dim). A view "
        "only regroups numbers in memory order, so each 'head' gets pieces of several tokens: tokens "
        "and heads are mixed. View to (b, num_tokens, num_heads, head_dim) first, then .transpose(1, 2).",
        _output_follows(SplitRecipe(split_transposes=False),
                        SplitRecipe(split_transposes=False, merge_transposes=False)),
    ),
    Mistake(
        "merge without transpose",
        "Your heads are merged without transposing back. The context is (b, num_heads, num_tokens, "
        "head_dim); viewing it straight to (b, num_tokens, d_out) puts one head's rows where other "
        "tokens belong. Call .transpose(1, 2) first, then .contiguous().view(b, num_tokens, d_out).",
        _output_follows(SplitRecipe(merge_transposes=False)),
    ),
    Mistake(
        "scaled by √d_out",
        "The scores are scaled by √d_out = √{t.config.d_out}, but each head's dot products have only "
        "head_dim = {t.config.head_dim} terms. Divide by √head_dim: self.head_dim ** 0.5, or "
        "keys.shape[-1] ** 0.5 after the split.",
        _output_follows(SplitRecipe(scale_by="d_out")),
    ),
    Mistake(
        "not scaled",
        "The scores are not scaled. Divide them by √head_dim (self.head_dim ** 0.5) before the "
        "softmax, so that large dot products do not make the softmax nearly one-hot.",
        _output_follows(SplitRecipe(scale_by="nothing")),
    ),
    Mistake(
        "no causal mask",
        "There is no causal mask: every token also attends to the tokens after it. Fill the future "
        "positions of the scores with -inf before the softmax: "
        "attn_scores.masked_fill(self.mask.bool()[:num_tokens, :num_tokens], -torch.inf).",
        _output_follows(SplitRecipe(causal_mask="none")),
    ),
    Mistake(
        "mask filled with 0",
        "The future positions are filled with 0 instead of -inf. A score of 0 still gets weight "
        "after the softmax (e⁰ = 1); only -inf gives a future token exactly zero weight.",
        _output_follows(SplitRecipe(causal_mask="0 before softmax")),
    ),
    Mistake(
        "mask after softmax",
        "The causal mask is applied after the softmax. Zeroing future weights afterwards leaves rows "
        "that no longer sum to 1, and filling them with -inf gives inf and nan. Mask the scores with "
        "-inf before the softmax, so each row of weights sums to 1 over the visible tokens.",
        _output_follows(SplitRecipe(causal_mask="0 after softmax"),
                        SplitRecipe(causal_mask="-inf after softmax")),
    ),
    Mistake(
        "softmax over the wrong axis",
        "The softmax runs over the wrong axis. Each query's weights over the keys must sum to 1, so "
        "normalise over the last axis of the scores, (b, num_heads, num_tokens, num_tokens): "
        "torch.softmax(..., dim=-1).",
        _output_follows(*(SplitRecipe(softmax_dim=dim) for dim in (-2, 1, 0))),
    ),
    Mistake(
        "out_proj not applied",
        "Your class defines out_proj, but the forward never applies it. After merging the heads, "
        "return self.out_proj(context): in MultiHeadAttention the output projection is part of the "
        "forward pass.",
        _output_follows(SplitRecipe(out_proj=False)),
    ),
)


@never_raises
def check_weight_split(cls):
    """Check a weight-split attention class: build it over several configurations and compare its
    output with a reference computed from each instance's own W_query/W_key/W_value (and out_proj)."""
    problem = first_mistake(NOT_A_CLASS_MISTAKES, cls)
    if problem:
        name = cls.__name__ if isinstance(cls, type) else type(cls).__name__
        return CheckResult(False, problem.message.format(name=name, kind=_kind(cls)))
    for config in WEIGHT_SPLIT_CONFIGS:
        trial = SplitTrial(cls, config)
        if trial.passed:
            continue
        mistake = first_mistake(WEIGHT_SPLIT_MISTAKES, trial)
        if mistake is None:
            return CheckResult(False, _unexplained(trial))
        names = _listed(trial.unusable_projections) if mistake.name == "projections missing" else ""
        message = mistake.message.format(t=trial, kind=_kind(trial.output), names=names)
        seen = "" if trial.stage == "constructor" else f"\n(Seen with {trial.call}.)"
        return CheckResult(False, message + seen)
    heads = sorted({c.num_heads for c in WEIGHT_SPLIT_CONFIGS})
    return CheckResult(
        True,
        f"Your forward pass matches the reference, computed from each instance's own weights, in all "
        f"{len(WEIGHT_SPLIT_CONFIGS)} configurations: {', '.join(map(str, heads[:-1]))} and {heads[-1]} "
        "heads, d_in ≠ d_out, and inputs shorter than context_length.",
    )


def _kind(value):
    """``a list``, ``the function f``, ``None``: what a value is, in words."""
    if value is None:
        return "None"
    if callable(value) and hasattr(value, "__name__") and not isinstance(value, type):
        return f"the function {value.__name__}"
    return f"a value of type {type(value).__name__}"


def _listed(names):
    """``a``, ``a and b``, ``a, b and c``."""
    return " and ".join(filter(None, (", ".join(names[:-1]), names[-1])))


def _unexplained(trial):
    return (
        f"Your output has the right shape, {trial.expected_shape}, but not the right values: the "
        f"largest difference from the reference is {trial.largest_difference:.3g}. None of the usual "
        "mistakes explains it (perhaps two of them together). Check each step once more: split with "
        "view and transpose(1, 2); scores queries @ keys.transpose(2, 3); mask the future with -inf; "
        "softmax over the last axis after dividing by √head_dim; context, transpose back, merge; "
        f"out_proj.\n(Seen with {trial.call}.)"
    )


weight_split = Exercise(
    checker=check_weight_split,
    hints=(
        "Project once, then split. self.W_query(x) has shape (b, num_tokens, d_out): view it as "
        "(b, num_tokens, self.num_heads, self.head_dim), then .transpose(1, 2) so that the heads "
        "come before the tokens. Do the same for the keys and the values.",
        "The scores are queries @ keys.transpose(2, 3), shape (b, num_heads, num_tokens, num_tokens). "
        "Fill self.mask.bool()[:num_tokens, :num_tokens] with -torch.inf, divide by "
        "self.head_dim ** 0.5, and take the softmax over the last axis.",
        "The context is attn_weights @ values, (b, num_heads, num_tokens, head_dim). Transpose it "
        "back with .transpose(1, 2), merge with .contiguous().view(b, num_tokens, self.d_out), and "
        "return self.out_proj(context).",
    ),
    solution_code=textwrap.dedent(
        """\
        class MyWeightSplit(MultiHeadAttention):
            def forward(self, x):
                b, num_tokens, _ = x.shape
                queries = self.W_query(x)  # (b, num_tokens, d_out)
                keys = self.W_key(x)  # (b, num_tokens, d_out)
                values = self.W_value(x)  # (b, num_tokens, d_out)

                # Split the last axis into heads, then put the heads before the tokens.
                queries = queries.view(b, num_tokens, self.num_heads, self.head_dim).transpose(1, 2)
                keys = keys.view(b, num_tokens, self.num_heads, self.head_dim).transpose(1, 2)
                values = values.view(b, num_tokens, self.num_heads, self.head_dim).transpose(1, 2)
                # each is now (b, num_heads, num_tokens, head_dim)

                attn_scores = queries @ keys.transpose(2, 3)  # (b, num_heads, num_tokens, num_tokens)
                future = self.mask.bool()[:num_tokens, :num_tokens]  # (num_tokens, num_tokens)
                attn_scores = attn_scores.masked_fill(future, -torch.inf)
                attn_weights = torch.softmax(attn_scores / self.head_dim ** 0.5, dim=-1)
                attn_weights = self.dropout(attn_weights)

                context = (attn_weights @ values).transpose(1, 2)  # (b, num_tokens, num_heads, head_dim)
                context = context.contiguous().view(b, num_tokens, self.d_out)  # (b, num_tokens, d_out)
                return self.out_proj(context)  # (b, num_tokens, d_out)


        check_weight_split(MyWeightSplit)
        """
    ),
)
