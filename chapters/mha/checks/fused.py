"""Chapter 5's exercise: a forward pass that hands attention to the fused kernel.

The reader subclasses ``FusedAttentionStart`` (the constructor is given, the forward raises)
and writes a ``forward`` with ``torch.nn.functional.scaled_dot_product_attention``. The check
builds the class in several configurations and compares its output with the book's
``MultiHeadAttentionCombinedQKV`` given the instance's own weights; it names the mistake it
recognises: a missing or inverted causal mask, the heads in the wrong axis, a ``view`` of a
``chunk`` slice that cannot work, dropout in evaluation mode or none in
training, a kernel call whose result is thrown away, and shortcuts that hand in the book's own
module.
"""

import textwrap
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from torch.overrides import TorchFunctionMode

from ..attention import MultiHeadAttention, MultiHeadAttentionWrapper
from ..variants import (
    FusedMultiHeadAttention,
    MultiHeadAttentionCombinedQKV,
    TorchMultiheadAttentionAdapter,
)
from .classes import class_answer_mistakes, watching_book_forwards
from .config import Trial, TrialConfig, check_class, trial_mistakes, unexplained
from .core import Exercise, Mistake, evaluating, never_raises
from .reference import same

BOOK_MODULES = (
    FusedMultiHeadAttention,
    MultiHeadAttentionCombinedQKV,
    MultiHeadAttention,
    MultiHeadAttentionWrapper,
    TorchMultiheadAttentionAdapter,
)


class FusedAttentionStart(nn.Module):
    """The exercise's starting point: the layers are built, ``forward`` is for the reader.

    ``qkv`` projects to queries, keys and values at once: its output's last axis holds all
    queries, then all keys, then all values, each ``d_out`` wide and split into heads of
    ``head_dim``. ``mask`` is ``True`` above the diagonal, where a token would see the future.
    """

    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        if d_out % num_heads:
            raise ValueError(f"d_out={d_out} must be divisible by num_heads={num_heads}.")
        self.d_in = d_in
        self.d_out = d_out
        self.num_heads = num_heads
        self.head_dim = d_out // num_heads
        self.qkv = nn.Linear(d_in, 3 * d_out, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)
        self.dropout_p = dropout  # a probability, for the fused kernel
        future = torch.ones(context_length, context_length, dtype=torch.bool).triu(1)
        self.register_buffer("mask", future)  # (context_length, context_length)

    def forward(self, x):
        raise NotImplementedError("This is the starting point: write forward in your own class.")


#: Several heads and a full-length input first, where most mistakes show; then a shorter input
#: than the mask with biases, one head, and a dropout probability (the output in evaluation
#: mode must not change).
FUSED_CONFIGS = (
    TrialConfig(d_in=6, d_out=8, context_length=6, num_heads=2, num_tokens=6, seed=1),
    TrialConfig(
        d_in=5, d_out=12, context_length=8, num_heads=3, num_tokens=5, qkv_bias=True, seed=2
    ),
    TrialConfig(d_in=4, d_out=4, context_length=4, num_heads=1, num_tokens=4, seed=3),
    TrialConfig(d_in=8, d_out=8, context_length=7, num_heads=4, num_tokens=7, dropout=0.5, seed=4),
)


@dataclass(frozen=True)
class FusedRecipe:
    """How a forward pass over ``qkv`` and ``out_proj`` computes its output, right or wrong."""

    qkv_order: str = "3, heads"  # view(b, T, 3, H, hd); or "heads, 3": view(b, T, H, 3, hd)
    heads: str = "transposed"  # to (b, H, T, hd); "not transposed": (b, T, H, hd) into SDPA;
    # "viewed": view straight to (b, H, T, hd), which mixes tokens and heads
    merge_transposes: bool = True
    causal: str = "is_causal"  # or "none", "inverted" (attn_mask keeps only the future)
    scale_power: float = 0.5  # scores divided by head_dim ** scale_power
    out_proj: bool = True


CORRECT = FusedRecipe()


def fused_attention_recipe(module, x, recipe=CORRECT):
    """What ``recipe`` computes from ``module``'s ``qkv`` and ``out_proj`` (no dropout)."""
    b, num_tokens, _ = x.shape
    heads, head_dim = module.num_heads, module.head_dim
    qkv = module.qkv(x)  # (b, num_tokens, 3 * d_out)
    if recipe.qkv_order == "3, heads":
        parts = qkv.view(b, num_tokens, 3, heads, head_dim).unbind(2)
    else:
        parts = qkv.view(b, num_tokens, heads, 3, head_dim).unbind(3)
    # each part: (b, num_tokens, num_heads, head_dim)
    if recipe.heads == "transposed":
        parts = [p.transpose(1, 2) for p in parts]  # (b, num_heads, num_tokens, head_dim)
    elif recipe.heads == "viewed":
        parts = [p.reshape(b, heads, num_tokens, head_dim) for p in parts]
    queries, keys, values = parts
    seen = queries.shape[-2]  # the axis the kernel takes for tokens
    future = torch.ones(seen, seen, dtype=torch.bool).triu(1)
    mask = {"is_causal": ~future, "none": None, "inverted": future}[recipe.causal]
    scale = head_dim**-recipe.scale_power
    context = F.scaled_dot_product_attention(queries, keys, values, attn_mask=mask, scale=scale)
    if recipe.heads != "not transposed" and recipe.merge_transposes:
        context = context.transpose(1, 2)  # (b, num_tokens, num_heads, head_dim)
    context = context.reshape(b, num_tokens, module.d_out)
    return module.out_proj(context) if recipe.out_proj else context


def book_reference(module, x):
    """The book's ``MultiHeadAttentionCombinedQKV`` with ``module``'s weights, on ``x``."""
    n = module.mask.shape[0]
    book = MultiHeadAttentionCombinedQKV(
        module.d_in, module.d_out, n, 0.0, module.num_heads, qkv_bias=module.qkv.bias is not None
    )
    book.qkv.load_state_dict(module.qkv.state_dict())
    book.out_proj.load_state_dict(module.out_proj.state_dict())
    with evaluating(book):
        return book(x)  # (b, num_tokens, d_out)


class _PerturbedKernel(TorchFunctionMode):
    """Adds 1 to every result of ``F.scaled_dot_product_attention``: a forward whose output
    comes from the kernel then changes, one that throws the kernel's result away does not."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        result = func(*args, **(kwargs or {}))
        if func is F.scaled_dot_product_attention:
            return result + 1.0
        return result


class _FailedView(TorchFunctionMode):
    """Records the shape and strides of the first tensor whose ``view`` raised."""

    def __init__(self):
        super().__init__()
        self.failed = None

    def __torch_function__(self, func, types, args=(), kwargs=None):
        try:
            return func(*args, **(kwargs or {}))
        except RuntimeError:
            if func is torch.Tensor.view and self.failed is None:
                self.failed = (tuple(args[0].shape), tuple(args[0].stride()))
            raise


class FusedTrial(Trial):
    """The reader's class on one configuration: what it built, returned, raised and called."""

    dropout_belongs = (
        "Dropout belongs inside the kernel, on its attention weights: pass "
        "dropout_p=self.dropout_p while self.training (0.0 otherwise), and drop nothing "
        "yourself."
    )

    def watch(self, stack):
        super().watch(stack)
        self.book_calls = stack.enter_context(watching_book_forwards())

    def follows(self, recipe=CORRECT):
        return self.gives(lambda module, x: fused_attention_recipe(module, x, recipe))

    def expected(self):
        return book_reference(self.module, self.x)

    @property
    def correct(self):
        return self.gives(book_reference)

    @property
    def failed_view(self):
        """``(shape, strides)`` of the tensor whose ``view`` raised in the forward, or None."""
        if self.stage != "forward" or "view" not in str(self.error):
            return None
        watcher = _FailedView()
        try:
            with evaluating(self.module), watcher:
                self.module(self.x)
        except Exception:
            pass
        return watcher.failed

    @property
    def viewed_a_chunk(self):
        """A ``view`` that failed on one third of ``self.qkv(x)``, as ``chunk`` cuts it: a
        (b, num_tokens, d_out) slice whose rows lie 3 * d_out apart in memory."""
        found = self.failed_view
        d_out = self.config.d_out
        return found is not None and found[0][-1:] == (d_out,) and found[1][-2:-1] == (3 * d_out,)

    @property
    def kernel_result_unused(self):
        """The output stays the same when the kernel's result changes: a decoy call."""
        with evaluating(self.module), _PerturbedKernel():
            return same(self.module(self.x), self.output)


def _follows(**changes):
    return lambda t: t.follows(FusedRecipe(**changes))


NOT_A_CLASS_MISTAKES = class_answer_mistakes(
    "fused_attention.check",
    "MyFusedAttention",
    start=FusedAttentionStart,
    book=BOOK_MODULES,
    first="What are the steps from x to the output? fused_attention.hint(1) gives a first nudge.",
)

TORCH_LAYER = Mistake(
    "torch's attention layer",
    "Your forward runs torch.nn.MultiheadAttention (or multi_head_attention_forward, the "
    "function behind it), PyTorch's own layer: it brings its own projections, split and "
    "merge of heads, the steps this practice asks you to write. Split self.qkv(x) into heads "
    "yourself and call torch.nn.functional.scaled_dot_product_attention directly.",
    lambda t: t.torch_attention.layer,
)
DELEGATES = Mistake(
    "delegates to the book",
    "Your forward hands the work to the book's {t.book_calls[0]}. Write the steps "
    "yourself, from self.qkv(x) to self.out_proj.",
    lambda t: t.book_calls,
)
CONSTRUCTOR, RAISES, NOT_A_TENSOR, WRONG_SHAPE = trial_mistakes("FusedAttentionStart", "forward")

FUSED_MISTAKES = (
    CONSTRUCTOR,
    DELEGATES,
    Mistake(
        "the starting code",
        "Your forward still raises NotImplementedError: this is the starting code, and the "
        "forward pass is yours to write. What does the kernel need from self.qkv(x), and in "
        "which shape? fused_attention.hint(1), just below the check, starts from there.",
        lambda t: isinstance(t.error, NotImplementedError),
    ),
    TORCH_LAYER,
    Mistake(
        "mask not sliced",
        "On {t.config.num_tokens} tokens, fewer than context_length="
        "{t.config.context_length}, your forward raised {t.error_text}. A mask taken "
        "from self.mask must be cut to the input's length first.",
        lambda t: (
            t.stage == "forward"
            and t.config.num_tokens < t.config.context_length
            and any(word in str(t.error) for word in ("size", "shape", "match"))
        ),
    ),
    Mistake(
        "chunk, then view",
        "Your forward raised {t.error_text}. chunk(3, dim=-1) cuts self.qkv(x) into three "
        "slices of shape (b, num_tokens, d_out) whose rows still lie 3 * d_out apart in "
        "memory, so view can only split their last axis: view each to (b, num_tokens, "
        "num_heads, head_dim), then transpose(1, 2).",
        lambda t: t.viewed_a_chunk,
    ),
    RAISES,
    NOT_A_TENSOR,
    WRONG_SHAPE,
    Mistake(
        "dropout in evaluation mode",
        "In evaluation mode your forward gives a different output on each call: dropout is "
        "still on. The kernel applies dropout_p whenever it is above 0, so pass "
        "self.dropout_p only while self.training, and 0.0 otherwise.",
        lambda t: t.random_in_eval,
    ),
    Mistake(
        "no causal mask",
        "Every token also attends to the tokens after it: there is no causal mask. "
        "scaled_dot_product_attention applies one only when asked.",
        _follows(causal="none"),
    ),
    Mistake(
        "mask inverted",
        "Your mask is the wrong way round. In scaled_dot_product_attention a boolean "
        "attn_mask is True where attention is *allowed*, the opposite of masked_fill: "
        "self.mask is True on the future, so each token sees only what comes after it.",
        _follows(causal="inverted"),
    ),
    Mistake(
        "heads not before tokens",
        "The kernel got queries of shape (b, num_tokens, num_heads, head_dim): it takes "
        "the second axis for heads and the third for tokens, so your tokens attend across "
        "heads. Give it (b, num_heads, num_tokens, head_dim).",
        _follows(heads="not transposed"),
    ),
    Mistake(
        "view straight to heads",
        "Your heads are viewed straight to (b, num_heads, num_tokens, head_dim), which "
        "mixes tokens and heads. View to (b, num_tokens, num_heads, head_dim) first, then "
        "move the heads axis.",
        _follows(heads="viewed"),
    ),
    Mistake(
        "merge without transpose",
        "The kernel's output is (b, num_heads, num_tokens, head_dim); reshaping it straight "
        "to (b, num_tokens, d_out) puts one head's rows where other tokens belong. Move the "
        "heads back after the tokens first.",
        _follows(merge_transposes=False),
    ),
    Mistake(
        "queries, keys and values interleaved",
        "Your split of self.qkv(x) assumes each head's query, key and value sit side by "
        "side. The last axis holds all queries, then all keys, then all values: view it as "
        "(b, num_tokens, 3, num_heads, head_dim).",
        _follows(qkv_order="heads, 3"),
    ),
    Mistake(
        "scaled twice",
        "The scores are scaled twice: scaled_dot_product_attention already divides them "
        "by √head_dim, so do not scale the queries (or pass scale) yourself.",
        _follows(scale_power=1.0),
    ),
    Mistake(
        "out_proj not applied",
        "Your forward never applies self.out_proj: after merging the heads, the output "
        "projection is part of the forward pass.",
        _follows(out_proj=False),
    ),
    unexplained(
        "split self.qkv(x) into queries, keys and values; heads before tokens; a causal "
        "kernel call; heads back after tokens; out_proj."
    ),
)

#: Checked once the outputs are right: what the fused kernel adds.
AFTER_MATCH_MISTAKES = (
    DELEGATES,
    TORCH_LAYER,
    Mistake(
        "no fused kernel",
        "Your output is right, but your forward computes the attention step by step. The "
        "exercise is to hand scores, mask, softmax and weighted sum to "
        "torch.nn.functional.scaled_dot_product_attention.",
        lambda t: not t.torch_attention.kernel,
    ),
    Mistake(
        "kernel result unused",
        "Your forward calls scaled_dot_product_attention but does not use what it returns: "
        "when the check changed the kernel's result, your output stayed the same. Send the "
        "kernel's output on to the merge of the heads and self.out_proj.",
        lambda t: t.kernel_result_unused,
    ),
    Mistake(
        "no dropout in training",
        "In training mode your forward applies no dropout, although the module was built "
        "with dropout={t.config.dropout}. Pass self.dropout_p to the kernel while "
        "self.training.",
        lambda t: t.dropout_place == "none",
    ),
    Mistake(
        "dropout in the wrong place",
        "{t.dropout_text}",
        lambda t: t.dropout_misplaced or t.dropout_place == "raises",
    ),
)


@never_raises
def check_fused_attention(cls):
    """Check a class whose forward uses ``F.scaled_dot_product_attention``: build it in several
    configurations and compare it with the book's modules given the instance's own weights."""
    return check_class(
        cls,
        NOT_A_CLASS_MISTAKES,
        FusedTrial,
        FUSED_CONFIGS,
        FUSED_MISTAKES,
        AFTER_MATCH_MISTAKES,
        f"Your forward matches the book's modules in all {len(FUSED_CONFIGS)} configurations "
        "(one to four heads, biases, inputs shorter than context_length), comes from the "
        "fused kernel's result, and in training drops whole attention weights (token 0's "
        "context is 0 or its value / (1 - p), the mean of 48 calls is the eval output).",
    )


fused_attention = Exercise(
    checker=check_fused_attention,
    hints=(
        "Three steps: make queries, keys and values of shape (b, num_heads, num_tokens, "
        "head_dim) from self.qkv(x); let the kernel do the attention; bring the heads back "
        "together and apply self.out_proj.",
        "self.qkv(x) is (b, num_tokens, 3 * d_out). View it as (b, num_tokens, 3, "
        "num_heads, head_dim) and move axis 2 to the front and the heads before the tokens: "
        "permute(2, 0, 3, 1, 4) gives 3 × (b, num_heads, num_tokens, head_dim).",
        "The kernel call needs two more arguments besides the three tensors: one that makes "
        "it causal, and dropout_p, which must be 0.0 unless self.training. Its output is "
        "(b, num_heads, num_tokens, head_dim): transpose(1, 2), then reshape to "
        "(b, num_tokens, self.d_out).",
    ),
    solution_code=textwrap.dedent(
        """\
        class MyFusedAttention(FusedAttentionStart):
            def forward(self, x):
                b, num_tokens, _ = x.shape
                qkv = self.qkv(x)  # (b, num_tokens, 3 * d_out)
                qkv = qkv.view(b, num_tokens, 3, self.num_heads, self.head_dim)
                queries, keys, values = qkv.permute(2, 0, 3, 1, 4)
                # each (b, num_heads, num_tokens, head_dim)
                dropout_p = self.dropout_p if self.training else 0.0
                context = F.scaled_dot_product_attention(
                    queries, keys, values, dropout_p=dropout_p, is_causal=True
                )  # (b, num_heads, num_tokens, head_dim)
                context = context.transpose(1, 2)
                # (b, num_tokens, num_heads, head_dim)
                context = context.reshape(b, num_tokens, self.d_out)
                return self.out_proj(context)  # (b, num_tokens, d_out)


        fused_attention.check(MyFusedAttention)
        """
    ),
)
