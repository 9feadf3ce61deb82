"""Chapter 7's check, the evidence half: how it builds the reader's class, and what one build shows.

:class:`TiledTrial` runs the reader's class on one :class:`TiledConfig` and answers the check's
questions: is the output ``MultiHeadAttention``'s, or what a known mistake (a
:class:`TiledRecipe`) computes; how large were the blocks of scores, and how many; does dropout
act in training only. The mistakes and the exercise are in :mod:`.tiled`.
"""

from dataclasses import dataclass, replace

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from ..attention import MultiHeadAttention
from .classes import book_classes, watching_calls
from .config import Trial, TrialConfig
from .core import evaluating, kind_of

PROJECTIONS = ("W_query", "W_key", "W_value")


@dataclass(frozen=True)
class TiledConfig(TrialConfig):
    """A :class:`TrialConfig` with the size of a block."""

    block_size: int = 4

    @property
    def kwargs(self):
        return {**super().kwargs, "block_size": self.block_size}

    @property
    def blocks(self):
        return -(-self.num_tokens // self.block_size)

    @property
    def causal_blocks(self):
        return self.blocks * (self.blocks + 1) // 2

    @property
    def divisible_tokens(self):
        return self.num_tokens - self.num_tokens % self.block_size

    def divisible_part(self):
        """The same configuration cut to the longest length that the block divides."""
        return replace(self, num_tokens=self.num_tokens - self.num_tokens % self.block_size)


#: head_dim differs from every block size and from d_in, so the check tells a block of scores
#: (left factor head_dim wide) from the other products. Three query blocks that the block
#: divides first, where most mistakes show; then a length it does not divide, with biases; a
#: length shorter than a block; one token; and dropout (which must not act in eval mode).
TILED_CONFIGS = (
    TiledConfig(d_in=6, d_out=6, context_length=12, num_heads=2, num_tokens=12, seed=1),
    TiledConfig(
        d_in=5, d_out=9, context_length=14, num_heads=3, num_tokens=10, qkv_bias=True, seed=2
    ),
    TiledConfig(d_in=4, d_out=6, context_length=8, num_heads=1, num_tokens=3, block_size=5, seed=3),
    TiledConfig(d_in=4, d_out=6, context_length=8, num_heads=2, num_tokens=1, seed=4),
    TiledConfig(d_in=8, d_out=12, context_length=9, num_heads=4, num_tokens=9, dropout=0.5, seed=5),
)


@dataclass(frozen=True)
class TiledRecipe:
    """How a loop over key blocks computes the context, right or wrong."""

    rescale_sum: bool = True
    rescale_out: bool = True
    factor: str = "old - new"  # exp(old max - new max); "new - old": inverted, see the recipe
    diagonal: str = "mask"  # "none": no mask; "whole": the diagonal block masked entirely
    divide: str = "end"  # "inside": out divided by the running sum inside the loop
    scaled: bool = True  # scores divided by √head_dim


CORRECT = TiledRecipe()
#: The factor upside down: exp(new max - old max), from a starting maximum of -inf (nan at once)
#: or with a first block that sets the state.
WRONG_FACTORS = (TiledRecipe(factor="new - old, from -inf"), TiledRecipe(factor="new - old"))


def tiled_recipe(module, x, recipe=CORRECT):
    """What ``recipe`` computes from ``module``'s layers on ``x`` (no dropout)."""
    b, num_tokens, _ = x.shape
    queries, keys, values = (module.split_heads(getattr(module, n)(x)) for n in PROJECTIONS)
    size = module.block_size
    blocks = []
    for q_start in range(0, num_tokens, size):
        q = queries[:, :, q_start : q_start + size]  # (b, num_heads, rows, head_dim)
        q_end = q_start + q.shape[2]
        row_max = torch.full((*q.shape[:3], 1), -torch.inf, dtype=q.dtype)
        row_sum = torch.zeros_like(row_max)
        out = torch.zeros_like(q)
        for k_start in range(0, q_end, size):
            k_end = min(k_start + size, q_end)
            k, v = keys[:, :, k_start:k_end], values[:, :, k_start:k_end]
            scores = q @ k.transpose(2, 3)  # (b, num_heads, rows, cols)
            if recipe.scaled:
                scores = scores / module.head_dim**0.5
            if k_end > q_start + 1 and recipe.diagonal == "mask":
                scores = scores.masked_fill(module.mask[q_start:q_end, k_start:k_end], -torch.inf)
            elif k_end > q_start + 1 and recipe.diagonal == "whole":
                scores = torch.full_like(scores, -torch.inf)
            new_max = torch.maximum(row_max, scores.amax(-1, keepdim=True))
            weights = torch.exp(scores - new_max)
            if recipe.factor == "old - new":
                factor = torch.exp(row_max - new_max)
            elif recipe.factor == "new - old, from -inf":  # inf × 0 = nan on the first block
                factor = torch.exp(new_max - row_max)
            else:  # the inverse, with a first block that sets the state (no inf * 0)
                factor = torch.where(row_max == -torch.inf, 0.0, torch.exp(new_max - row_max))
            row_sum = (row_sum * factor if recipe.rescale_sum else row_sum) + weights.sum(
                -1, keepdim=True
            )
            out = (out * factor if recipe.rescale_out else out) + weights @ v
            if recipe.divide == "inside":
                out = out / row_sum
            row_max = new_max
        blocks.append(out / row_sum if recipe.divide == "end" else out)
    context = torch.cat(blocks, dim=2).transpose(1, 2).reshape(b, num_tokens, module.d_out)
    return module.out_proj(context)


def book_reference(module, x):
    """The book's ``MultiHeadAttention`` with ``module``'s weights, on ``x`` (eval mode)."""
    book = MultiHeadAttention(
        module.W_query.in_features,
        module.d_out,
        module.mask.shape[0],
        0.0,
        module.num_heads,
        qkv_bias=module.W_query.bias is not None,
    )
    for name in (*PROJECTIONS, "out_proj"):
        getattr(book, name).load_state_dict(getattr(module, name).state_dict())
    with evaluating(book):
        return book(x)  # (b, num_tokens, d_out)


def same(output, expected):
    """Equal up to float32 rounding (atol 1e-5, rtol 1e-4), NaN where NaN."""
    return (
        isinstance(output, torch.Tensor)
        and output.shape == expected.shape
        and output.is_floating_point()
        and torch.allclose(output.double(), expected.double(), rtol=1e-4, atol=1e-5, equal_nan=True)
    )


class _ProductLog(TorchDispatchMode):
    """Every plain matrix product's left-factor width and output shape, and every op's name."""

    def __init__(self):
        super().__init__()
        self.products, self.ops = [], set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func.overloadpacket.__name__
        self.ops.add(name)
        out = func(*args, **(kwargs or {}))
        if name in {"mm", "addmm", "bmm", "baddbmm"}:
            self.products.append((args[-2].shape[-1], tuple(out.shape)))
        return out


def book_modules():
    """The book's modules an answer may not be, or hand its work to (not the skeletons)."""
    from ..tiled import TiledAttention  # its query_block is this exercise's answer

    found = [c for c in book_classes() if not c.__module__.startswith(__package__)]
    return tuple(dict.fromkeys([*found, TiledAttention]))


def book_code():
    """``{code: name}`` of the calls to refuse: every book module's forward and
    ``query_block``, and this check's own recipe, which computes the answer."""
    code = {tiled_recipe.__code__: "tiled_recipe (this check's own)"}
    for cls in book_modules():
        for method in ("forward", "query_block"):
            if method in vars(cls):
                code[vars(cls)[method].__code__] = f"{cls.__name__}.{method}"
    return code


class TiledTrial(Trial):
    """The reader's class on one configuration: its output, errors, products and calls."""

    def __init__(self, cls, config):
        self.cls, self.config = cls, config
        self.module = self.output = self.error = self.stage = None
        self.book_calls, self.log = [], _ProductLog()
        self.x = config.input()  # (batch, num_tokens, d_in)
        try:
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(config.seed)
                self.module = cls(**config.kwargs)
                with evaluating(self.module), watching_calls(book_code()) as self.book_calls:
                    with self.log:
                        self.output = self.module(self.x)
        except Exception as error:
            self.stage = "constructor" if self.module is None else "forward"
            self.error = error

    @property
    def call(self):
        return self.config.call(self.cls)

    def expected(self):
        return book_reference(self.module, self.x)

    @property
    def correct(self):
        return self.error is None and same(self.output, self.expected())

    def follows(self, recipe):
        if self.error is not None:
            return False
        with evaluating(self.module):
            return same(self.output, tiled_recipe(self.module, self.x, recipe))

    @property
    def uses_fused_kernel(self):
        return any(name.startswith("_scaled_dot_product") for name in self.log.ops)

    @property
    def score_blocks(self):
        """The output shapes of the batched products whose left factor is head_dim wide."""
        head_dim = self.config.head_dim  # the linear layers' products are 2-D: not scores
        return [s for width, s in self.log.products if width == head_dim and len(s) >= 3]

    @property
    def widest_scores(self):
        return max((max(shape[-2:]) for shape in self.score_blocks), default=0)

    @property
    def blocks_computed(self):
        """Blocks of scores computed, each counted in block_size × block_size units."""
        c = self.config
        per_head = sum(s[-2] * s[-1] * (s[0] if len(s) == 3 else 1) for s in self.score_blocks)
        elements = per_head / (c.batch * c.num_heads)
        full = c.num_tokens * c.num_tokens / (c.blocks * c.blocks)  # one block's elements
        return round(elements / full)

    @property
    def first_block(self):
        """``(q, output)`` of ``query_block`` on the first block of queries, in eval mode."""
        module = self.module
        with evaluating(module), torch.random.fork_rng(devices=[]):
            queries, keys, values = (
                module.split_heads(getattr(module, n)(self.x)) for n in PROJECTIONS
            )
            q = queries[:, :, : module.block_size]  # (b, num_heads, rows, head_dim)
            return q, module.query_block(q, keys, values, 0)

    @property
    def block_output(self):
        return self.first_block[1]

    @property
    def block_kind(self):
        return kind_of(self.block_output)

    @property
    def block_shape(self):
        return tuple(self.block_output.shape)

    @property
    def block_q_shape(self):
        return tuple(self.first_block[0].shape)

    @property
    def has_nan(self):
        return isinstance(self.output, torch.Tensor) and bool(self.output.isnan().any())

    @property
    def right_on_divisible_part(self):
        part = self.config.divisible_part()
        if part.num_tokens in (0, self.config.num_tokens):
            return False
        x = self.x[:, : part.num_tokens]
        with evaluating(self.module):
            return same(self.module(x), book_reference(self.module, x))

    def training_outputs(self, seeds=(1, 2)):
        outputs = []
        for seed in seeds:
            with torch.random.fork_rng(devices=[]), torch.no_grad():
                torch.manual_seed(seed)
                self.module.train()
                outputs.append(self.module(self.x))
        self.module.eval()
        return outputs

    @property
    def dropout_in_eval(self):
        if self.config.dropout == 0:
            return False
        with evaluating(self.module), torch.random.fork_rng(devices=[]):
            torch.manual_seed(7)
            return not torch.equal(self.module(self.x), self.output)

    @property
    def no_dropout_in_training(self):
        return all(torch.equal(out, self.output) for out in self.training_outputs())

    @property
    def dropout_on_the_sum(self):
        """Token 1 sees one key: right dropout gives it 0 or twice its value, never the value.

        Dropping the weights in the sum as well divides them out again (or gives 0 / 0).
        """
        outputs = self.training_outputs()
        first = self.output[:, 0]
        return any(out.isnan().any() or torch.allclose(out[:, 0], first) for out in outputs)
