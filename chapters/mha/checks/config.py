"""How a check builds the reader's class, what one build shows, and the check over all builds.

Chapters 3, 5, 6 and 7 check a class the reader wrote by building it several times, with
different sizes, and calling it on a seeded input of the check's own. :class:`TrialConfig`
holds one such configuration; a chapter's :class:`Trial` runs the class on it and answers what
its catalogue of mistakes asks; :func:`check_class` runs the trials and names the first mistake.
"""

import contextlib
from dataclasses import dataclass, replace
from functools import cached_property

import torch

from .classes import AnswerFacts, watching_torch_attention
from .core import (
    CheckResult,
    Mistake,
    describe_error,
    evaluating,
    fill,
    first_mistake,
    kind_of,
    listed,
)
from .dropout import dropout_place, dropout_story, training_outputs
from .reference import PROJECTIONS, same


@dataclass(frozen=True)
class TrialConfig:
    """One way the check builds the reader's class and calls it."""

    d_in: int
    d_out: int
    context_length: int
    num_heads: int
    num_tokens: int
    qkv_bias: bool = False
    dropout: float = 0.0
    batch: int = 2
    seed: int = 0

    @property
    def head_dim(self):
        return self.d_out // self.num_heads

    @property
    def kwargs(self):
        """The constructor's arguments; ``qkv_bias`` only when it is on, as a reader writes it."""
        kwargs = dict(
            d_in=self.d_in,
            d_out=self.d_out,
            context_length=self.context_length,
            dropout=self.dropout,
            num_heads=self.num_heads,
        )
        return {**kwargs, "qkv_bias": True} if self.qkv_bias else kwargs

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
        return replace(self, num_tokens=self.context_length)

    def with_heads(self, num_heads):
        """The same configuration with another head count and the same ``head_dim``."""
        return replace(self, d_out=num_heads * self.head_dim, num_heads=num_heads)


class Trial:
    """The reader's class built on one :class:`TrialConfig` and called once in eval mode (the
    reader's random state untouched), and the questions every chapter asks of that run.

    A subclass says what the right output is (``expected()``, ``correct``), may watch the
    call (:meth:`watch`) and says where the chapter's dropout goes (``dropout_belongs``).
    """

    training_error = torch_attention = None
    book_calls = ()  # the book's code the call ran, for a chapter that watches it
    dropout_belongs = (
        "Dropout belongs on the attention weights, after the softmax: "
        "attn_weights = self.dropout(attn_weights)."
    )

    def __init__(self, cls, config):
        self.cls, self.config = cls, config
        self.module = self.output = self.error = None
        self.stage = None  # "constructor" or "forward", when that raised
        self.x = config.input()  # (batch, num_tokens, d_in)
        try:
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(config.seed)
                self.module = cls(**config.kwargs)
                with evaluating(self.module), contextlib.ExitStack() as stack:
                    self.watch(stack)
                    self.output = self.module(self.x)
        except Exception as error:
            self.stage = "constructor" if self.module is None else "forward"
            self.error = error

    def watch(self, stack):
        """Enter what watches the first call into ``stack``: here, torch's own attention."""
        self.torch_attention = stack.enter_context(watching_torch_attention())

    @property
    def t(self):
        """The trial itself, as the messages name it: ``{t.config.d_out}``."""
        return self

    @property
    def call(self):
        return self.config.call(self.cls)

    @property
    def kind(self):
        return kind_of(self.output)

    @property
    def names(self):
        return listed(self.unusable_projections)

    def gives(self, expected):
        """Whether the output is ``expected(module, x)`` (computed in eval mode)."""
        if self.error is not None:
            return False
        try:
            with evaluating(self.module):
                return same(self.output, expected(self.module, self.x))
        except Exception:
            return False

    @property
    def random_in_eval(self):
        """A second call in eval mode, with another seed, gives another output."""
        if self.error is not None or not isinstance(self.output, torch.Tensor):
            return False
        with evaluating(self.module), torch.random.fork_rng(devices=[]):
            torch.manual_seed(self.config.seed + 1)
            again = self.module(self.x)
        return not torch.allclose(again, self.output, rtol=0, atol=0, equal_nan=True)

    @cached_property
    def dropout_place(self):
        """Where dropout acts in training mode (:func:`.dropout.dropout_place`), or "raises";
        ``None`` when it drops whole weights, or the configuration has no dropout."""
        if not self.config.dropout or self.error is not None:
            return None
        try:
            outputs = training_outputs(self.module, self.x)
        except Exception as error:
            self.training_error = error
            return "raises"
        shape = self.output.shape
        if not all(isinstance(o, torch.Tensor) and o.shape == shape for o in outputs):
            return "not a tensor"
        config = self.config
        return dropout_place(self.module, outputs, self.output, config.num_heads, config.dropout)

    @property
    def dropout_text(self):
        """Where the reader's dropout went, and where it belongs."""
        return dropout_story(self.dropout_place, self.dropout_belongs)

    @property
    def training_error_text(self):
        error = self.training_error
        return describe_error(error).rstrip(".") if error else "no tensor"

    @property
    def dropout_misplaced(self):
        return self.dropout_place not in (None, "none", "raises")

    @property
    def expected_shape(self):
        c = self.config
        return (c.batch, c.num_tokens, c.d_out)

    @property
    def output_shape(self):
        return tuple(self.output.shape) if isinstance(self.output, torch.Tensor) else None

    @property
    def shows_heads_unmerged(self):
        c = self.config
        return self.output_shape in {
            (c.batch, c.num_heads, c.num_tokens, c.head_dim),
            (c.batch, c.num_tokens, c.num_heads, c.head_dim),
        }

    @property
    def largest_difference(self):
        difference = (self.output.double() - self.expected().double()).abs()
        return float(difference.nan_to_num(nan=torch.inf).max())

    @property
    def error_text(self):
        return describe_error(self.error).rstrip(".")  # the message adds its own full stop

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


def trial_mistakes(start, method):
    """The mistakes every class check names alike, for a class built from ``start`` whose
    ``method`` the reader writes: the constructor or the call raises, no tensor, wrong shape."""
    return (
        Mistake(
            "constructor raises",
            f"Building your class as {{call}} raised {{error_text}}. Keep the constructor "
            f"of {start}: subclass it and write only {method}.",
            lambda t: t.stage == "constructor",
        ),
        Mistake(
            "forward raises",
            "Calling your class on an input of shape {t.config.input_shape} raised {error_text}.",
            lambda t: t.stage == "forward",
        ),
        Mistake(
            "not a tensor",
            "Your class returned {kind}, not a tensor. Return the output: a tensor of shape "
            "(b, num_tokens, d_out), here {expected_shape}.",
            lambda t: not isinstance(t.output, torch.Tensor),
        ),
        Mistake(
            "wrong shape",
            "Your output has shape {output_shape}, but it should be (b, num_tokens, d_out), "
            "here {expected_shape}.",
            lambda t: t.output_shape != t.expected_shape,
        ),
    )


def unexplained(steps):
    """The last word of a class check: right shape, wrong values, no known mistake."""
    return Mistake(
        "unexplained",
        "Your output has the right shape, {t.expected_shape}, but not the right values "
        "(largest difference {t.largest_difference:.3g}), and none of the usual mistakes "
        f"explains it (perhaps two of them together). Check each step: {steps}",
        lambda t: True,
    )


def check_class(cls, not_a_class, trial, configs, wrong, after_match=(), passed=""):
    """Check the reader's class: first what it is (``not_a_class``, mistakes of the answer),
    then ``trial(cls, config)`` for each of ``configs``: a wrong output is named from
    ``wrong``, a right one is asked ``after_match``. The starting code and a failing
    constructor are named without the configuration; every other mistake with it."""
    problem = first_mistake(not_a_class, cls)
    if problem:
        return CheckResult(False, problem.tell(AnswerFacts(cls)))
    with torch.random.fork_rng(devices=[]):  # the reader's random state is left as it was
        return _first_failure(cls, trial, configs, wrong, after_match) or CheckResult(True, passed)


def _first_failure(cls, trial, configs, wrong, after_match):
    for config in configs:
        t = trial(cls, config)
        mistake = first_mistake(after_match, t) if t.correct else first_mistake(wrong, t)
        if mistake is not None:
            quiet = t.stage == "constructor" or mistake.name == "the starting code"
            return CheckResult(
                False, mistake.tell(t) + ("" if quiet else fill("\n(Seen with {call}.)", t))
            )
    return None
