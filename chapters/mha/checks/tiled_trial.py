"""Chapter 7's check, the evidence half: how it builds the reader's class, and what one build shows.

:class:`TiledTrial` runs the reader's class on one :class:`TiledConfig` and answers the check's
questions: is the output ``MultiHeadAttention``'s, or what a known mistake (a
:class:`TiledRecipe`) computes; did any tensor of scores grow wider than a block, and how many
blocks of scores were computed (and were any of them future blocks); where does dropout act.
The mistakes and the exercise are in :mod:`.tiled`.
"""

import math
from dataclasses import dataclass, replace
from functools import cached_property

import torch

from ..counting import QuietDispatchMode
from .classes import book_classes, watching_calls
from .config import Trial, TrialConfig
from .core import evaluating, kind_of, listed
from .dropout import PLACES
from .reference import PROJECTIONS, future_mask, same, split_attention


@dataclass(frozen=True)
class TiledConfig(TrialConfig):
    """A :class:`TrialConfig` with the size of a block."""

    block_size: int = 4
    #: ``W_query``'s weights are multiplied by this after the build: scores in the hundreds,
    #: where ``exp(score)`` overflows float32 (above about 88.7) unless a maximum is subtracted.
    query_gain: float = 1.0

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
#: length shorter than a block; one token; dropout (which must not act in eval mode, and must
#: drop whole weights in training); and scores in the hundreds, where exp overflows.
TILED_CONFIGS = (
    TiledConfig(d_in=6, d_out=6, context_length=12, num_heads=2, num_tokens=12, seed=1),
    TiledConfig(
        d_in=5, d_out=9, context_length=14, num_heads=3, num_tokens=10, qkv_bias=True, seed=2
    ),
    TiledConfig(d_in=4, d_out=6, context_length=8, num_heads=1, num_tokens=3, block_size=5, seed=3),
    TiledConfig(d_in=4, d_out=6, context_length=8, num_heads=2, num_tokens=1, seed=4),
    TiledConfig(d_in=8, d_out=12, context_length=9, num_heads=4, num_tokens=9, dropout=0.5, seed=5),
    TiledConfig(
        d_in=6, d_out=6, context_length=12, num_heads=2, num_tokens=12, query_gain=250.0, seed=6
    ),
)


@dataclass(frozen=True)
class TiledRecipe:
    """How a loop over key blocks computes the context, right or wrong."""

    rescale_sum: bool = True
    rescale_out: bool = True
    factor: str = "old - new"  # exp(old max - new max); "new - old", "old / new": see the recipe
    running_max: bool = True  # False: each block's weights relative to its own maximum
    diagonal: str = "mask"  # "none": no mask; "whole": the diagonal block masked entirely;
    # "diagonal too": each query's own key hidden as well (a mask built with diagonal=0)
    divide: str = "end"  # "inside": out divided by the running sum inside the loop; "never"
    scale: str = "sqrt head_dim"  # or "sqrt d_out", "head_dim", "none": the scores' divisor
    sum_factor: str = "factor"  # "factor squared": the running sum rescaled by factor²


CORRECT = TiledRecipe()
#: The factor upside down, exp(new max - old max), with a first block that sets the state (from a
#: starting maximum of -inf it is inf, and inf × 0 makes every output nan: see ``all_nan``).
WRONG_FACTORS = (TiledRecipe(factor="new - old"),)


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
            scores = (
                scores
                / {
                    "sqrt head_dim": module.head_dim**0.5,
                    "sqrt d_out": module.d_out**0.5,
                    "head_dim": module.head_dim,
                    "none": 1.0,
                }[recipe.scale]
            )
            if k_end > q_start + 1 and recipe.diagonal == "mask":
                scores = scores.masked_fill(module.mask[q_start:q_end, k_start:k_end], -torch.inf)
            elif k_end > q_start + 1 and recipe.diagonal == "whole":
                scores = torch.full_like(scores, -torch.inf)
            elif k_end > q_start and recipe.diagonal == "diagonal too":  # key ≥ query hidden
                keys_at = torch.arange(k_start, k_end)[None, :]  # (1, cols)
                queries_at = torch.arange(q_start, q_end)[:, None]  # (rows, 1)
                scores = scores.masked_fill(keys_at >= queries_at, -torch.inf)
            new_max = torch.maximum(row_max, scores.amax(-1, keepdim=True))
            if not recipe.running_max:  # the block's own maximum, and nothing rescaled
                new_max = scores.amax(-1, keepdim=True)
            weights = torch.exp(scores - new_max)
            first = row_max == -torch.inf  # the wrong factors, with a first block that sets it
            if not recipe.running_max:
                factor = torch.ones_like(row_max)
            elif recipe.factor == "old - new":
                factor = torch.exp(row_max - new_max)
            elif recipe.factor == "new - old":
                factor = torch.where(first, 0.0, torch.exp(new_max - row_max))
            else:  # "old / new": the ratio of the maxima
                factor = torch.where(first, 0.0, row_max / new_max)
            sum_factor = factor**2 if recipe.sum_factor == "factor squared" else factor
            row_sum = (row_sum * sum_factor if recipe.rescale_sum else row_sum) + weights.sum(
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
    """``MultiHeadAttention``'s output with ``module``'s layers, on ``x``."""
    return split_attention(module, x, module.num_heads)  # (b, num_tokens, d_out)


def score_like(t, config):
    """Whether ``t`` could be scores (or weights) of more than a block of keys or queries.

    Scores are batched, ``(..., rows, cols)``. The projections, keys, values, running output
    and context end in ``head_dim``, ``d_out`` or ``d_in``; a transposed slice of the keys has
    ``head_dim`` rows; the row statistics end in 1. None of those counts.
    """
    if not (isinstance(t, torch.Tensor) and t.is_floating_point() and t.dim() >= 3):
        return False
    rows, cols = t.shape[-2:]
    if cols in (1, config.head_dim, config.d_out, config.d_in) or rows == config.head_dim:
        return False
    return max(rows, cols) > config.block_size


def elementwise_scores(args, out, head_dim):
    """``(..., rows, cols)`` when ``out`` is queries times keys, elementwise and broadcast
    against each other, ``(..., rows, cols, head_dim)`` (trailing size-1 axes aside), as
    ``(q.unsqueeze(3) * k.unsqueeze(2)).sum(-1)`` computes scores; else ``None``."""

    def trimmed(shape):
        shape = list(shape)
        while shape and shape[-1] == 1:
            shape.pop()
        return shape

    tensors = [a for a in args if isinstance(a, torch.Tensor)]
    if len(tensors) != 2 or not isinstance(out, torch.Tensor):
        return None
    shape = trimmed(out.shape)
    factors = [trimmed(t.shape) for t in tensors]
    broadcast = all(t.numel() < out.numel() for t in tensors)
    ends = all(f[-1:] == [head_dim] for f in (shape, *factors))
    return tuple(shape[:-1]) if broadcast and ends and len(shape) >= 3 else None


def _off_key_axes(args, config):
    """The dimensions a maximum reduces (``amax``, ``max`` over a dimension or over all), when
    its input looks like a block of scores, ``(..., rows, cols)``, and they are not just the
    last one, the keys'; else ``()``."""
    t = args[0]
    if len(args) > 1 and isinstance(args[1], torch.Tensor):
        return ()  # torch.max(a, b): elementwise, not a reduction
    if t.dim() < 2 or t.shape[-1] in (1, config.head_dim) or t.shape[-1] > config.block_size:
        return ()
    dims = args[1] if len(args) > 1 else range(t.dim())
    dims = sorted({d % t.dim() for d in ([dims] if isinstance(dims, int) else dims)})
    return tuple(dims) if dims != [t.dim() - 1] else ()


#: Operators that read a whole row of scores to normalise it.
SOFTMAX_OPS = {"_softmax", "softmax", "_log_softmax", "log_softmax", "logsumexp"}


class _OpLog(QuietDispatchMode):
    """What the operators of one forward did, as far as the check needs it.

    ``products``: each plain matrix product's left-factor width and output shape; ``ops``: every
    operator's name; ``wide``: ``(operator, shape)`` of each new tensor of scores wider than a
    block (:func:`score_like`), and ``wide_readers``, the operators that read one; ``exps``: for
    each ``exp`` of a per-row statistic (last dimension 1), whether it was all ones; ``dropped``:
    each tensor that dropout (``empty_like``, then ``bernoulli_``) was applied to;
    ``nan_product``: whether a product made a nan; ``max_axes``: ``(dims, shape)`` of each
    maximum of scores taken over other dimensions than the keys' (the last).
    """

    def __init__(self, config):
        super().__init__()
        self.config = config
        self.products, self.ops, self.wide, self.wide_readers = [], set(), [], set()
        self.exps, self.dropped, self._noise, self._wide_tensors = [], [], {}, []
        self.nan_product, self.max_axes = False, []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func.overloadpacket.__name__
        self.ops.add(name)
        if any(a is w for a in args for w in self._wide_tensors):
            self.wide_readers.add(name)
        out = func(*args, **(kwargs or {}))
        if name in {"mm", "addmm", "bmm", "baddbmm"}:
            self.products.append((args[-2].shape[-1], tuple(out.shape)))
            self.nan_product |= bool(out.isnan().any())
        elif name == "mul" and (tile := elementwise_scores(args, out, self.config.head_dim)):
            self.products.append((self.config.head_dim, tile))
            self.nan_product |= bool(out.isnan().any())
        elif name in ("amax", "max") and (dims := _off_key_axes(args, self.config)):
            self.max_axes.append((dims, tuple(args[0].shape)))
        if not func.is_view and score_like(out, self.config):
            self.wide.append((name, tuple(out.shape)))
            self._wide_tensors.append(out)
        if name == "exp" and isinstance(out, torch.Tensor) and out.dim() >= 3:
            if out.shape[-1] == 1:
                self.exps.append(bool((out == 1).all()))
        if name == "empty_like":
            self._noise[id(out)] = (out, args[0])
        elif name == "bernoulli_" and id(args[0]) in self._noise:
            self.dropped.append(self._noise.pop(id(args[0]))[1])
        return out


def score_shapes(log, config):
    """The shapes of the tensors of scores an :class:`_OpLog` saw computed, in any layout: each
    product whose left factor is head_dim wide (2-D, 3-D or more), and each elementwise product
    of queries and keys. A product whose result ends in d_out or head_dim is a layer's or a mix
    of values, not scores."""
    return [
        shape
        for width, shape in log.products
        if width == config.head_dim
        and len(shape) >= 2
        and shape[-1] not in (config.d_out, config.head_dim)
    ]


def _tile_story(qs, qe, ks, ke, keep, got, want, context_length):
    """What the reader's code hides (``got``) in the block of queries ``qs:qe`` and keys
    ``ks:ke``, where causal attention hides ``want`` (rows ``keep`` only), in words."""
    where = f"For queries {qs} to {qe - 1} and keys {ks} to {ke - 1}, your code"
    right = f"self.mask[{qs}:{qe}, {ks}:{ke}]"
    mask = future_mask(context_length)
    for ro, co, sign in ((0, 0, ""), (qs, 0, ""), (0, ks, ""), (qs, ks, "~"), (0, 0, "~")):
        part = mask[ro : ro + qe - qs, co : co + ke - ks]
        if part.shape == (qe - qs, ke - ks) and torch.equal((~part if sign else part)[keep], got):
            sliced = f"{sign}self.mask[{ro}:{ro + qe - qs}, {co}:{co + ke - ks}]"
            if sign and (ro, co) == (qs, ks):
                return (
                    f"{where} hides what {sliced} marks: your mask is inverted, so each query "
                    "sees the keys after it and not those up to itself. masked_fill hides where "
                    f"the mask is True, and self.mask is True on the later keys: use {right} "
                    "as it is, without ~ (or == 0)."
                )
            nothing = " (nothing)" if not got.any() else ""
            how = {0: "at the origin", qs: "without the column offset"}.get(ro, "")
            how = how if co == 0 else "without the row offset"
            return (
                f"{where} hides what {sliced} marks{nothing}: the mask sliced {how}, as if "
                f"the block started at query {ro} and key {co}. This block's part of the mask "
                f"is {right}: rows from q_start, columns from k_start."
            )
    lost = [ks + j for j in range(ke - ks) if got[:, j].all() and not want[:, j].all()]
    if lost:
        return (
            f"For queries {qs} to {qe - 1}, your code gives no weight to key "
            f"{listed(map(str, lost))}, which some of them must see. Does the loop over key "
            "blocks stop early, or a block end early? range(0, q_end, self.block_size) "
            "reaches the last key block, and keys[:, :, k_start:k_end] stops before k_end: "
            "k_end = min(k_start + self.block_size, q_end)."
        )
    i, j = (int(a) for a in (got != want).nonzero()[0])
    query = int(torch.arange(qs, qe)[keep][i])
    seen = "gives weight to" if want[i, j] else "gives no weight to"
    after = "after it" if want[i, j] else "up to it"
    return (
        f"{where} {seen} key {ks + j} from query {query}, a key {after}. A query sees "
        f"the keys up to itself: the diagonal block hides {right}."
    )


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
        self.log = _OpLog(config)
        super().__init__(cls, config)

    def watch(self, stack):
        """Watch the call, after scaling ``W_query`` by the configuration's ``query_gain``."""
        super().watch(stack)
        self.module.W_query.weight.mul_(self.config.query_gain)  # under no_grad
        self.book_calls = stack.enter_context(watching_calls(book_code()))
        stack.enter_context(self.log)

    def expected(self):
        return book_reference(self.module, self.x)

    @property
    def correct(self):
        return self.gives(book_reference)

    def follows(self, recipe):
        return self.gives(lambda module, x: tiled_recipe(module, x, recipe))

    @property
    def score_blocks(self):
        """The shapes of the tensors of scores computed in the forward (:func:`score_shapes`)."""
        return score_shapes(self.log, self.config)

    @property
    def widest_scores(self):
        """The most keys (or queries) any tensor of scores spanned: a product's, or a new
        tensor's such as a ``torch.cat`` of blocks (:func:`score_like`)."""
        shapes = [*self.score_blocks, *(shape for _, shape in self.log.wide)]
        return max((max(shape[-2:]) for shape in shapes), default=0)

    @property
    def wide_story(self):
        """What held more than a block of scores, in the reader's terms."""
        if self.log.wide_readers & SOFTMAX_OPS:
            how = "Your softmax reads all of a row's scores at once"
        elif any(name == "cat" for name, _ in self.log.wide):
            how = "Your code joins the blocks' scores with torch.cat into a whole row"
        else:
            return ""
        return f"{how}: that is the whole score matrix again, one row block at a time. "

    def _qkv(self):
        """The module's queries, keys and values on ``x`` (eval mode), each
        ``(b, num_heads, num_tokens, head_dim)``."""
        with evaluating(self.module):
            return [self.module.split_heads(getattr(self.module, n)(self.x)) for n in PROJECTIONS]

    def _each_block(self, queries, keys, values, hide_future=False):
        """``(q_start, rows, output, log)`` of ``query_block`` on each block of queries, in eval
        mode; with ``hide_future`` the keys and values after the block are nan."""
        size = self.config.block_size
        for q_start in range(0, self.config.num_tokens, size):
            q = queries[:, :, q_start : q_start + size]  # (b, num_heads, rows, head_dim)
            end = q_start + q.shape[2]
            k, v = keys, values
            if hide_future:
                k, v = keys.clone(), values.clone()
                k[:, :, end:] = v[:, :, end:] = torch.nan
            log = _OpLog(self.config)
            with evaluating(self.module), torch.random.fork_rng(devices=[]), log:
                output = self.module.query_block(q, k, v, q_start)
            yield q_start, q.shape[2], output, log

    @property
    def touches_future(self):
        """Whether a product of ``query_block``, on any block of queries, reads a later key: with
        the keys and values after the block set to nan, a score made from one is nan."""
        blocks = self._each_block(*self._qkv(), hide_future=True)
        return any(log.nan_product for *_, log in blocks)

    @property
    def scoreless_block(self):
        """``(first, last)`` query of the first block for which ``query_block`` computed no
        score at all, or ``None``."""
        for q_start, rows, _, log in self._each_block(*self._qkv()):
            if not score_shapes(log, self.config):
                return q_start, q_start + rows - 1
        return None

    @property
    def max_axes(self):
        """The first maximum of scores over other axes than the keys', in words."""
        dims, shape = self.log.max_axes[0]
        return (
            f"{'dimension' if len(dims) == 1 else 'dimensions'} {listed(map(str, dims))} of {shape}"
        )

    @cached_property
    def weights(self):
        """``(b, num_heads, T, T)``: the weight each query gives each value, read from
        ``query_block`` (linear in the values) by adding 1 to one value at a time."""
        queries, keys, values = self._qkv()

        def context(v):  # (b, num_heads, T, head_dim)
            return torch.cat([out for *_, out, _ in self._each_block(queries, keys, v)], 2)

        base, columns = context(values), []
        for j in range(self.config.num_tokens):
            moved = values.clone()
            moved[:, :, j] += 1
            columns.append((context(moved) - base).mean(-1))  # (b, num_heads, T)
        return torch.stack(columns, -1)

    @property
    def mask_story(self):
        """What the reader's code hides wrongly in the first block of (queries, keys) where the
        keys a query gives weight to are not those up to itself; ``None`` if there is none.

        Only rows with a finite output count. A wrong block is named after the slice of the
        module's mask that hides exactly what it hides, when one does."""
        w, n, size = self.weights, self.config.num_tokens, self.config.block_size
        rows = w.isfinite().all(-1).all(0).all(0)  # (T,)
        hidden = ~(w.abs() > 1e-6).any(0).any(0)  # (T, T): no weight from any batch or head
        right = future_mask(n)
        for qs, ks in ((qs, ks) for qs in range(0, n, size) for ks in range(0, n, size)):
            qe, ke = min(qs + size, n), min(ks + size, n)
            keep = rows[qs:qe]
            got, want = hidden[qs:qe, ks:ke][keep], right[qs:qe, ks:ke][keep]
            if not torch.equal(got, want):
                return _tile_story(qs, qe, ks, ke, keep, got, want, self.config.context_length)
        return None

    @property
    def block_shares(self):
        """``(share, how)`` when each of the n key blocks a query sees gets the same share of
        its weight, 1/n (averaged) or 1 (added): blocks normalised each on its own; else None."""
        w, n, size = self.weights, self.config.num_tokens, self.config.block_size
        shares = torch.stack([w[..., k : k + size].sum(-1) for k in range(0, n, size)], -1)
        seen = torch.arange(n) // size + 1  # (T,): how many key blocks each query sees
        several = seen > 1
        if not several.any():
            return None
        visited = torch.arange(shares.shape[-1]) < seen[:, None]  # (T, blocks)
        for share, how in ((1 / seen[:, None], ("1/n", "averaged")), (1.0, ("1", "added"))):
            expected = torch.where(visited, share, 0.0)[several]  # (rows, blocks)
            if torch.allclose(shares[:, :, several].double(), expected.double(), atol=1e-4):
                return how
        return None

    @property
    def times_over(self):
        return self.blocks_computed / self.config.causal_blocks

    @property
    def all_nan(self):
        return isinstance(self.output, torch.Tensor) and bool(self.output.isnan().all())

    @property
    def overflows(self):
        """Non-finite output on scores in the hundreds, where the book's module is finite."""
        return (
            self.config.query_gain != 1
            and isinstance(self.output, torch.Tensor)
            and not bool(self.output.isfinite().all())
            and bool(self.expected().isfinite().all())
        )

    @property
    def largest_score(self):
        """The largest score of any head in this configuration (eval mode)."""
        queries, keys, _ = self._qkv()
        scores = queries @ keys.transpose(2, 3) / self.module.head_dim**0.5
        return float(scores.masked_fill(future_mask(self.config.num_tokens), -torch.inf).max())

    @property
    def factor_always_one(self):
        """A factor (an ``exp`` of a per-row statistic) computed, but 1 even on the first block."""
        return bool(self.log.exps) and all(self.log.exps)

    @property
    def blocks_computed(self):
        """Blocks of scores computed, each counted in block_size × block_size units."""
        c = self.config
        elements = sum(math.prod(s) for s in self.score_blocks) / (c.batch * c.num_heads)
        full = c.num_tokens * c.num_tokens / (c.blocks * c.blocks)  # one block's elements
        return round(elements / full)

    @cached_property
    def first_block(self):
        """``(q, output)`` of ``query_block`` on the first block of queries, in eval mode."""
        queries, keys, values = self._qkv()
        q = queries[:, :, : self.config.block_size]  # (b, num_heads, rows, head_dim)
        with evaluating(self.module), torch.random.fork_rng(devices=[]):
            return q, self.module.query_block(q, keys, values, 0)

    @property
    def block_kind(self):
        return kind_of(self.first_block[1])

    @property
    def block_shapes(self):
        """``(output shape, q shape)`` of ``query_block`` on the first block of queries."""
        q, output = self.first_block
        return tuple(output.shape), tuple(q.shape)

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

    @property
    def dropout_spot(self):
        """Where the reader's dropout acts, when it does not drop whole weights: the values,
        the context, the scores (some negative or -inf), or weights that reach the sum too."""
        queries, keys, values = self._qkv()
        q = queries[:, :, : self.config.block_size]  # (b, num_heads, rows, head_dim)
        log, head_dim, places = _OpLog(self.config), self.config.head_dim, set()
        with torch.random.fork_rng(devices=[]), torch.no_grad(), log:
            torch.manual_seed(1)
            self.module.train()
            self.module.query_block(q, keys, values, 0)
        self.module.eval()
        for t in log.dropped:
            rows = t.shape[-2] if t.dim() >= 2 else 0
            if t.shape[-1] == head_dim and torch.equal(t, values[:, :, :rows]):
                places.add("values")
            elif t.shape[-1] == head_dim:
                places.add("context")
            elif not bool((t >= 0).all()):
                places.add("scores")
        order = ("scores", "values", "context")
        return next((p for p in order if p in places), "sum" if log.dropped else "elsewhere")

    @property
    def dropout_story(self):
        """What went wrong: the whole module's reading (:mod:`.dropout`) names dropout applied
        twice or after out_proj; the first block's operators name the other places."""
        if self.dropout_place in ("twice", "output"):
            return PLACES[self.dropout_place]
        return {
            "values": "In training mode your dropout drops single numbers of the values: a "
            "query that sees one key keeps some numbers of its value and loses others.",
            "context": "In training mode your dropout drops single numbers of an output (the "
            "running output or the context), after the weights have done their work.",
            "scores": "In training mode your dropout acts on the scores. A score set to 0 "
            "still gets weight exp(0 - max), and a masked -inf times 0 is nan: that drops "
            "no key.",
            "sum": "In training mode your dropout also reaches the running sum, so the "
            "division undoes it (a query with one visible key gets its value back, or "
            "0 / 0).",
            "elsewhere": "In training mode your output is not what dropping whole attention "
            "weights gives.",
        }[self.dropout_spot]
