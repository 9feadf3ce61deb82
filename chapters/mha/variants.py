"""More ways to compute the same multi-head attention, for chapter 4 to time side by side.

Every class takes ``(d_in, d_out, context_length, dropout, num_heads, qkv_bias=False)``, like
``MultiHeadAttention``, and ``d_out`` is the width of the whole output. ``copy_weights`` gives two
implementations the same weights, so they compute the same function and a timing compares like
with like.
"""

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from .attention import MultiHeadAttention, MultiHeadAttentionWrapper, check_config, check_heads_divide, check_input


class MultiHeadAttentionCombinedQKV(nn.Module):
    """``MultiHeadAttention`` with one ``Linear(d_in, 3 * d_out)`` for queries, keys and values.

    One matrix multiplication replaces three; the attention itself is still written out
    (scores, mask, softmax, weighted sum), so every intermediate can be inspected.
    """

    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        check_config(d_in, d_out, context_length, dropout, num_heads, who="MultiHeadAttentionCombinedQKV")
        check_heads_divide(d_out, num_heads, who="MultiHeadAttentionCombinedQKV")
        self.d_in = d_in
        self.d_out = d_out
        self.context_length = context_length
        self.num_heads = num_heads
        self.head_dim = d_out // num_heads
        self.qkv = nn.Linear(d_in, 3 * d_out, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer(
            "mask", torch.triu(torch.ones(context_length, context_length, dtype=torch.bool), diagonal=1)
        )

    def forward(self, x):
        check_input(x, self.d_in, self.context_length, who="MultiHeadAttentionCombinedQKV")
        b, num_tokens, _ = x.shape
        qkv = self.qkv(x).view(b, num_tokens, 3, self.num_heads, self.head_dim)  # (b, num_tokens, 3, num_heads, head_dim)
        queries, keys, values = qkv.permute(2, 0, 3, 1, 4)  # 3 × (b, num_heads, num_tokens, head_dim)

        attn_scores = queries @ keys.transpose(2, 3)  # (b, num_heads, num_tokens, num_tokens)
        future = self.mask[:num_tokens, :num_tokens]  # (num_tokens, num_tokens)
        attn_scores = attn_scores.masked_fill(future, -torch.inf)  # (b, num_heads, num_tokens, num_tokens)
        attn_weights = torch.softmax(attn_scores / self.head_dim ** 0.5, dim=-1)  # (b, num_heads, num_tokens, num_tokens)
        attn_weights = self.dropout(attn_weights)  # (b, num_heads, num_tokens, num_tokens)

        context = (attn_weights @ values).transpose(1, 2)  # (b, num_tokens, num_heads, head_dim)
        context = context.reshape(b, num_tokens, self.d_out)  # (b, num_tokens, d_out)
        return self.out_proj(context)  # (b, num_tokens, d_out)


class FusedMultiHeadAttention(nn.Module):
    """The book's fastest module: combined QKV projection, then PyTorch's fused attention kernel.

    ``scaled_dot_product_attention(..., is_causal=True)`` does scores, mask, softmax and the
    weighted sum in one kernel, without storing the ``(num_tokens, num_tokens)`` weights, and can
    skip the blocks the causal mask hides. Dropout on the weights applies only in training mode.
    """

    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        check_config(d_in, d_out, context_length, dropout, num_heads, who="FusedMultiHeadAttention")
        check_heads_divide(d_out, num_heads, who="FusedMultiHeadAttention")
        self.d_in = d_in
        self.d_out = d_out
        self.context_length = context_length
        self.num_heads = num_heads
        self.head_dim = d_out // num_heads
        self.qkv = nn.Linear(d_in, 3 * d_out, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)
        self.dropout_p = dropout  # a probability: the fused kernel applies dropout itself

    def forward(self, x):
        check_input(x, self.d_in, self.context_length, who="FusedMultiHeadAttention")
        b, num_tokens, _ = x.shape
        qkv = self.qkv(x).view(b, num_tokens, 3, self.num_heads, self.head_dim)  # (b, num_tokens, 3, num_heads, head_dim)
        queries, keys, values = qkv.permute(2, 0, 3, 1, 4)  # 3 × (b, num_heads, num_tokens, head_dim)

        context = F.scaled_dot_product_attention(
            queries, keys, values, dropout_p=self.dropout_p if self.training else 0.0, is_causal=True
        )  # (b, num_heads, num_tokens, head_dim)
        context = context.transpose(1, 2).reshape(b, num_tokens, self.d_out)  # (b, num_tokens, d_out)
        return self.out_proj(context)  # (b, num_tokens, d_out)


class TorchMultiheadAttentionAdapter(nn.Module):
    """``torch.nn.MultiheadAttention`` behind the book's constructor, as a reference point.

    It is called the way a fair comparison needs: ``batch_first``, a causal mask (with the
    ``is_causal`` hint) and ``need_weights=False``. Its fast path (evaluation mode, no gradients,
    an even head count) ignores the hint and applies the mask, expanded to every head, as given.
    ``nn.MultiheadAttention`` has one ``bias`` switch for its input and output projections, while
    the book's modules always give ``out_proj`` a bias; with ``qkv_bias=False`` the input bias is
    therefore held at zero (frozen).
    """

    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        check_config(d_in, d_out, context_length, dropout, num_heads, who="TorchMultiheadAttentionAdapter")
        check_heads_divide(d_out, num_heads, who="TorchMultiheadAttentionAdapter")
        if d_in != d_out:
            raise ValueError(
                f"TorchMultiheadAttentionAdapter: nn.MultiheadAttention projects queries from inputs "
                f"as wide as its output, but d_in={d_in} and d_out={d_out}. Use d_in == d_out, "
                "or one of the book's own modules."
            )
        self.d_in = d_in
        self.d_out = d_out
        self.context_length = context_length
        self.num_heads = num_heads
        self.head_dim = d_out // num_heads
        self.qkv_bias = qkv_bias
        self.attention = nn.MultiheadAttention(d_out, num_heads, dropout=dropout, bias=True, batch_first=True)
        if not qkv_bias:
            with torch.no_grad():
                self.attention.in_proj_bias.zero_()
            self.attention.in_proj_bias.requires_grad_(False)
        self.register_buffer(
            "mask", torch.triu(torch.ones(context_length, context_length, dtype=torch.bool), diagonal=1)
        )

    def forward(self, x):
        check_input(x, self.d_in, self.context_length, who="TorchMultiheadAttentionAdapter")
        num_tokens = x.shape[1]
        future = self.mask[:num_tokens, :num_tokens]  # (num_tokens, num_tokens)
        context, _ = self.attention(x, x, x, attn_mask=future, need_weights=False, is_causal=True)
        return context  # (b, num_tokens, d_out)


#: Every implementation chapter 4 times, fastest-to-write first. Keys name them in tables and CSVs.
IMPLEMENTATIONS = {
    "wrapper": MultiHeadAttentionWrapper,
    "split": MultiHeadAttention,
    "combined_qkv": MultiHeadAttentionCombinedQKV,
    "fused": FusedMultiHeadAttention,
    "torch_mha": TorchMultiheadAttentionAdapter,
}


def build(name, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
    """Build implementation ``name`` with a *total* output width ``d_out``, whatever its convention.

    The wrapper's ``d_out`` is per head, so it is built with ``d_out // num_heads``: otherwise it
    would do ``num_heads`` times the work of the others and a timing would compare unlike things.
    """
    if name not in IMPLEMENTATIONS:
        raise ValueError(f"Unknown implementation {name!r}; choose one of {', '.join(IMPLEMENTATIONS)}.")
    if name == "wrapper":
        check_config(d_in, d_out, context_length, dropout, num_heads, who="build('wrapper')")
        check_heads_divide(d_out, num_heads, who="build('wrapper')")
        d_out //= num_heads
    return IMPLEMENTATIONS[name](d_in, d_out, context_length, dropout, num_heads, qkv_bias)


@dataclass
class AttentionWeights:
    """One implementation's parameters in a common layout: ``(d_out, d_in)`` weights, as in ``nn.Linear``.

    Rows ``h * head_dim`` to ``(h + 1) * head_dim`` of ``query``, ``key`` and ``value`` belong to head ``h``.
    Biases are ``None`` when the module has none. A wrapper has no output projection: it reads as
    the identity with a zero bias.
    """

    query: torch.Tensor
    key: torch.Tensor
    value: torch.Tensor
    query_bias: torch.Tensor | None
    key_bias: torch.Tensor | None
    value_bias: torch.Tensor | None
    out: torch.Tensor
    out_bias: torch.Tensor
    num_heads: int


def read_weights(module):
    """The parameters of any implementation in ``IMPLEMENTATIONS``, as ``AttentionWeights`` (copies)."""
    if isinstance(module, MultiHeadAttentionWrapper):
        heads = module.heads
        qkv = [torch.cat([getattr(h, n).weight for h in heads]) for n in ("W_query", "W_key", "W_value")]
        has_bias = heads[0].W_query.bias is not None
        biases = [torch.cat([getattr(h, n).bias for h in heads]) if has_bias else None
                  for n in ("W_query", "W_key", "W_value")]
        width, device = qkv[0].shape[0], qkv[0].device
        out, out_bias = torch.eye(width, device=device), torch.zeros(width, device=device)
    elif isinstance(module, MultiHeadAttention):
        qkv = [module.W_query.weight, module.W_key.weight, module.W_value.weight]
        biases = [module.W_query.bias, module.W_key.bias, module.W_value.bias]
        out, out_bias = module.out_proj.weight, module.out_proj.bias
    elif isinstance(module, (MultiHeadAttentionCombinedQKV, FusedMultiHeadAttention)):
        qkv = list(module.qkv.weight.chunk(3))
        biases = list(module.qkv.bias.chunk(3)) if module.qkv.bias is not None else [None] * 3
        out, out_bias = module.out_proj.weight, module.out_proj.bias
    elif isinstance(module, TorchMultiheadAttentionAdapter):
        attention = module.attention
        qkv = list(attention.in_proj_weight.chunk(3))
        biases = list(attention.in_proj_bias.chunk(3)) if module.qkv_bias else [None] * 3
        out, out_bias = attention.out_proj.weight, attention.out_proj.bias
    else:
        raise ValueError(
            f"read_weights: {type(module).__name__} is not one of the book's implementations "
            f"({', '.join(cls.__name__ for cls in IMPLEMENTATIONS.values())})."
        )
    return AttentionWeights(*map(_detached, qkv), *map(_detached, biases), _detached(out), _detached(out_bias),
                            module.num_heads)


def _detached(t):
    """A copy of ``t`` outside autograd, so later writes to the module cannot change it (``None`` stays)."""
    return None if t is None else t.detach().clone()


def write_weights(module, weights):
    """Load ``AttentionWeights`` into ``module``; raise ``ValueError`` if they cannot fit it exactly."""
    who = f"copy_weights into {type(module).__name__}"
    target = read_weights(module)
    if weights.num_heads != target.num_heads:
        raise ValueError(f"{who}: the source has {weights.num_heads} heads, the target {target.num_heads}. "
                         "Build the target with the same num_heads.")
    if weights.query.shape != target.query.shape:
        raise ValueError(f"{who}: the source's query weights are {tuple(weights.query.shape)} (d_out, d_in), "
                         f"the target's {tuple(target.query.shape)}. Build both with the same d_in and total d_out.")
    if (weights.query_bias is None) != (target.query_bias is None):
        raise ValueError(f"{who}: one module has qkv_bias=True and the other qkv_bias=False. "
                         "Build both with the same qkv_bias.")
    with torch.no_grad():
        if isinstance(module, MultiHeadAttentionWrapper):
            if not (torch.equal(weights.out.to(target.out.device), target.out)
                    and torch.equal(weights.out_bias.to(target.out.device), target.out_bias)):
                raise ValueError(f"{who}: a wrapper has no output projection, so it can only take weights "
                                 "whose out_proj is the identity with zero bias (for example from "
                                 "MultiHeadAttention.from_wrapper). Compare with the output before out_proj instead.")
            head_dim = weights.query.shape[0] // weights.num_heads
            for h, head in enumerate(module.heads):
                block = slice(h * head_dim, (h + 1) * head_dim)
                for name, w, bias in (("W_query", weights.query, weights.query_bias),
                                      ("W_key", weights.key, weights.key_bias),
                                      ("W_value", weights.value, weights.value_bias)):
                    getattr(head, name).weight.copy_(w[block])
                    if bias is not None:
                        getattr(head, name).bias.copy_(bias[block])
            return module
        if isinstance(module, MultiHeadAttention):
            for name, w, bias in (("W_query", weights.query, weights.query_bias),
                                  ("W_key", weights.key, weights.key_bias),
                                  ("W_value", weights.value, weights.value_bias)):
                getattr(module, name).weight.copy_(w)
                if bias is not None:
                    getattr(module, name).bias.copy_(bias)
            out_proj = module.out_proj
        else:
            if isinstance(module, TorchMultiheadAttentionAdapter):
                in_weight, in_bias = module.attention.in_proj_weight, module.attention.in_proj_bias
                out_proj = module.attention.out_proj
            else:
                in_weight, in_bias = module.qkv.weight, module.qkv.bias
                out_proj = module.out_proj
            in_weight.copy_(torch.cat([weights.query, weights.key, weights.value]))
            if weights.query_bias is not None:
                in_bias.copy_(torch.cat([weights.query_bias, weights.key_bias, weights.value_bias]))
        out_proj.weight.copy_(weights.out)
        out_proj.bias.copy_(weights.out_bias)
    return module


def copy_weights(source, target):
    """Give ``target`` the weights of ``source`` (any two implementations) and return ``target``.

    Afterwards both compute the same function, up to floating-point rounding. A wrapper can only
    receive weights whose output projection is the identity, since it has no ``out_proj``.
    """
    return write_weights(target, read_weights(source))


def equivalent_modules(names, d_in, d_out, context_length, num_heads, qkv_bias=False, *, seed=123):
    """Build each implementation in ``names``, all computing the same function, in eval mode.

    The weights come from a seeded wrapper (total width ``d_out``), so every module's
    ``out_proj`` is the identity and even the wrapper takes part.
    """
    torch.manual_seed(seed)
    reference = build("wrapper", d_in, d_out, context_length, 0.0, num_heads, qkv_bias)
    modules = {}
    for name in names:
        if name == "wrapper":
            modules[name] = reference.eval()
        else:
            module = build(name, d_in, d_out, context_length, 0.0, num_heads, qkv_bias)
            modules[name] = copy_weights(reference, module).eval()
    return modules
