"""How a check builds the reader's class, and what the output of one such build shows.

Chapters 3, 5 and 6 check a class the reader wrote by building it several times, with
different sizes, and calling it on a seeded input of the check's own. :class:`TrialConfig`
holds one such configuration (chapter 6 adds its group count in a subclass); each chapter's
trial runs the class on it, and :class:`Trial` answers what every chapter asks of the output.
"""

from dataclasses import dataclass, replace
from functools import cached_property

import torch

from .core import describe_error, evaluating
from .dropout import dropout_place, dropout_story, training_outputs
from .reference import PROJECTIONS


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
    """The questions every class trial answers about the output of one build.

    A subclass sets ``config`` (a :class:`TrialConfig`), ``module``, its input ``x``,
    ``output`` and ``error``, and says what the right output is with ``expected()``;
    ``dropout_belongs`` says where the chapter's dropout goes.
    """

    training_error = None
    dropout_belongs = (
        "Dropout belongs on the attention weights, after the softmax: "
        "attn_weights = self.dropout(attn_weights)."
    )

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
        return float((self.output.double() - self.expected().double()).abs().max())

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
