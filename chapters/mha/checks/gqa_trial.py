"""The evidence behind chapter 6's grouped-query attention check (:mod:`.gqa`).

A :class:`GroupTrial` builds the reader's class on one :class:`GroupConfig` and runs it;
:func:`grouped_attention` computes what a :class:`GroupRecipe`, the correct pass or a known
wrong one, gives from the instance's own layers, so the check can say which one it follows.
"""

import os
import re
import traceback
from dataclasses import dataclass
from functools import cached_property

import torch

from .. import gqa as book
from . import reference
from .classes import torch_attention_message, watching_calls
from .config import Trial, TrialConfig
from .core import evaluating, listed
from .reference import PROJECTIONS

#: A repeat or repeat_interleave along dim=2 (or -2): the token axis of (b, G, T, hd).
TOKEN_AXIS_REPEAT = re.compile(r"repeat(_interleave)?\([^()]*?(dim\s*=\s*|,\s*)-?2\s*\)")


@dataclass(frozen=True)
class GroupConfig(TrialConfig):
    """A configuration of chapter 6's check: a :class:`.config.TrialConfig` with groups."""

    num_kv_groups: int = 1

    @property
    def group_size(self):
        return self.num_heads // self.num_kv_groups

    @property
    def kv_width(self):
        return self.num_kv_groups * self.head_dim

    @property
    def kwargs(self):
        kwargs = dict(super().kwargs)
        bias = kwargs.pop("qkv_bias", False)
        kwargs["num_kv_groups"] = self.num_kv_groups
        return {**kwargs, "qkv_bias": True} if bias else kwargs


@dataclass(frozen=True)
class GroupRecipe:
    """How a grouped-query pass computes its output from a module's layers.

    The defaults are the correct pass; each mistake changes one ingredient.
    """

    key_map: str = "repeat_interleave"  # head h reads block h // group_size; or "repeat"
    value_map: str = "repeat_interleave"
    scale_by: str = "head_dim"  # or "kv_width", "d_out", "group_size", "nothing"
    causal_mask: str = "-inf before softmax"  # or "none", "0 before softmax", "... after softmax"
    softmax_dim: int = -1
    transpose_back: bool = True  # heads back behind the tokens before the merge
    out_proj: bool = True


CORRECT_RECIPE = GroupRecipe()


def grouped_attention(module, x, num_heads, num_kv_groups, recipe=CORRECT_RECIPE):
    """The output of a grouped-query pass over ``module``'s own layers, per ``recipe``."""
    b, num_tokens, _ = x.shape
    queries, keys, values = (getattr(module, name)(x) for name in PROJECTIONS)
    head_dim = queries.shape[-1] // num_heads
    group_size = num_heads // num_kv_groups
    queries = queries.reshape(b, num_tokens, num_heads, head_dim).transpose(1, 2)
    keys = _expand(
        keys.reshape(b, num_tokens, num_kv_groups, head_dim).transpose(1, 2),
        group_size,
        recipe.key_map,
    )  # (b, num_heads, T, head_dim)
    values = _expand(
        values.reshape(b, num_tokens, num_kv_groups, head_dim).transpose(1, 2),
        group_size,
        recipe.value_map,
    )  # (b, num_heads, T, head_dim)
    scale = {
        "head_dim": head_dim,
        "kv_width": num_kv_groups * head_dim,
        "d_out": num_heads * head_dim,
        "group_size": group_size,
        "nothing": 1,
    }[recipe.scale_by] ** 0.5
    future = torch.ones(num_tokens, num_tokens, dtype=torch.bool).triu(1)
    fill = 0.0 if recipe.causal_mask.startswith("0") else -torch.inf

    attn_scores = queries @ keys.transpose(2, 3)  # (b, num_heads, T, T)
    if recipe.causal_mask.endswith("before softmax"):
        attn_scores = attn_scores.masked_fill(future, fill)
    attn_weights = torch.softmax(attn_scores / scale, dim=recipe.softmax_dim)
    if recipe.causal_mask.endswith("after softmax"):
        attn_weights = attn_weights.masked_fill(future, fill)
    context = attn_weights @ values  # (b, num_heads, T, head_dim)
    if recipe.transpose_back:
        context = context.transpose(1, 2)  # (b, T, num_heads, head_dim)
    context = context.reshape(b, num_tokens, -1)  # (b, T, d_out)
    return module.out_proj(context) if recipe.out_proj else context


def _expand(blocks, group_size, how):
    """``(b, G, T, hd)`` → ``(b, G * group_size, T, hd)``: each block in place, or cycled."""
    if how == "repeat_interleave":
        return blocks.repeat_interleave(group_size, dim=1)
    return blocks.repeat(1, group_size, 1, 1)


def book_code():
    """``{code object: name}`` of the book's code a reader's forward must not run, beyond the
    forward of any module class of ``mha``, which :func:`watching_calls` records by itself: the
    cache helpers, and the checks' own references."""
    helpers = (book.attend_to_cache, book.generate, book.prefill, book.KVCache.append)
    helpers += (grouped_attention, reference.attend, reference.split_attention)
    return {function.__code__: function.__qualname__ for function in helpers}


class GroupTrial(Trial):
    """One run of the reader's class on one configuration, and the facts the catalogue asks."""

    def watch(self, stack):
        super().watch(stack)
        self.book_calls = stack.enter_context(watching_calls(book_code()))

    def expected(self, recipe=CORRECT_RECIPE):
        """What ``recipe`` computes from this instance's own weights."""
        c = self.config
        with evaluating(self.module):
            return grouped_attention(self.module, self.x, c.num_heads, c.num_kv_groups, recipe)

    def matches(self, recipe=CORRECT_RECIPE):
        """Whether the reader's output is what ``recipe`` computes from this instance's weights."""
        return self.gives(lambda *_: self.expected(recipe))

    @property
    def correct(self):
        return not self.book_calls and not self.torch_attention and self.matches()

    @property
    def torch_attention_text(self):
        """What torch's attention does, and what to write here instead."""
        here = (
            "repeat each group's keys and values for the heads of its group yourself, then "
            "write chapter 3's steps with @, masked_fill and torch.softmax."
        )
        return torch_attention_message(self.torch_attention, here)

    def width_of(self, name):
        with evaluating(self.module):
            return getattr(self.module, name)(self.x).shape[-1]

    @property
    def key_width(self):
        return self.width_of("W_key")

    @property
    def works_on_full_length_input(self):
        c = self.config
        return c.num_tokens < c.context_length and (GroupTrial(self.cls, c.full_length()).correct)

    @property
    def failing_line(self):
        """The source line of the reader's code where the forward raised, if known."""
        frames = traceback.extract_tb(self.error.__traceback__)
        checker = os.path.dirname(os.path.abspath(__file__))  # the check's own watchers
        own = [
            f
            for f in frames
            if "torch" not in f.filename.replace("\\", "/").split("/")
            and os.path.dirname(os.path.abspath(f.filename)) != checker
        ]
        return (own or frames)[-1].line or "" if frames else ""

    @property
    def kv_viewed_with_num_heads(self):
        """A ``view`` of the keys or values into num_heads blocks raised: too few numbers."""
        c = self.config
        shape = f"[{c.batch}, {c.num_tokens}, {c.num_heads}, {c.head_dim}]"
        size = f"size {c.batch * c.num_tokens * c.kv_width}"
        text = str(self.error)
        return self.stage == "forward" and shape in text and size in text

    @property
    def head_axes_disagree(self):
        """The forward raised because a product met num_heads and num_kv_groups on one axis."""
        c = self.config
        text = str(self.error)
        return self.stage == "forward" and any(
            f"({a})" in text and f"({b})" in text
            for a, b in ((c.num_heads, c.num_kv_groups), (c.num_kv_groups, c.num_heads))
        )

    @property
    def repeated_by_group_count(self):
        """The forward raised because num_kv_groups² blocks met num_heads heads."""
        c = self.config
        text = str(self.error)
        squared = c.num_kv_groups**2
        return (
            self.stage == "forward"
            and squared != c.num_heads
            and f"({squared})" in text
            and f"({c.num_heads})" in text
        )

    @cached_property
    def tensors_at_failure(self):
        """Which of the keys and values the reader's code held when it raised, and in which
        form: ``{"keys", "values"}`` (one block per group) and ``{"keys expanded", "values
        expanded"}`` (one per head), recognised by value among the failing frames' locals."""
        c = self.config
        b, num_tokens = c.batch, c.num_tokens
        with evaluating(self.module):
            blocks = {
                name: getattr(self.module, layer)(self.x)
                .reshape(b, num_tokens, c.num_kv_groups, c.head_dim)
                .transpose(1, 2)  # (b, G, T, hd)
                for name, layer in (("keys", "W_key"), ("values", "W_value"))
            }
        forms = dict(blocks)
        n = c.group_size
        for name, t in blocks.items():
            forms[f"{name} expanded"] = t.repeat_interleave(n, dim=1)
            if n > 1:  # repeated on the token axis instead, before or after the transpose
                forms[f"{name} on tokens"] = t.repeat_interleave(n, dim=2)
                forms[f"{name} on tokens, cycled"] = t.repeat(1, 1, n, 1)
                forms[f"{name} on tokens, untransposed"] = t.transpose(1, 2).repeat_interleave(
                    n, dim=1
                )
        held = set()
        tb = self.error.__traceback__
        while tb is not None:
            for value in list(tb.tb_frame.f_locals.values()):
                if isinstance(value, torch.Tensor) and value.dim() == 4:
                    for name, form in forms.items():
                        if value.shape == form.shape and torch.allclose(value, form):
                            held.add(name)
            tb = tb.tb_next
        return held

    @property
    def repeated_on_tokens(self):
        """The forward raised holding keys or values repeated along the token axis, or on a
        line that repeats along dim=2 (or -2) when queries and keys met with unequal heads."""
        if self.stage != "forward":
            return False
        if any("on tokens" in name for name in self.tensors_at_failure):
            return True
        return self.head_axes_disagree and bool(TOKEN_AXIS_REPEAT.search(self.failing_line))

    @property
    def values_not_expanded(self):
        held = self.tensors_at_failure
        if self.head_axes_disagree and held:
            return "keys expanded" in held and "values expanded" not in held
        line = self.failing_line
        return self.head_axes_disagree and "value" in line and "key" not in line

    @property
    def keys_not_expanded(self):
        held = self.tensors_at_failure
        if self.head_axes_disagree and held:
            return "values expanded" in held and "keys expanded" not in held
        line = self.failing_line
        return self.head_axes_disagree and "key" in line and "value" not in line

    @property
    def book_code(self):
        return listed(sorted(set(self.book_calls)))
