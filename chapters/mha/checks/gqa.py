"""Chapter 6's check: a grouped-query forward, judged by what it computes from its own layers.

Each known wrong output is a buggy reference, :func:`grouped` with one ingredient changed; a
forward that raises is read from the call that failed (:class:`.shortcuts.Watch`); the book's
own forward and PyTorch's attention are refused; in training mode dropout drops whole weights.
"""

import ast
import inspect
import textwrap

import torch

from ..gqa import GroupedQueryAttention as Book
from .core import CheckResult, Exercise, never_raises
from .reference import Recipe, attend
from .shortcuts import check_class, dropped, judge, not_a_class

KEYS = ("d_in", "d_out", "context_length", "dropout", "num_heads", "num_kv_groups")
# fmt: off
CONFIGS = tuple((dict(zip(KEYS, c), **{"qkv_bias": True} if bias else {}), tokens, seed)
                for seed, (*c, bias, tokens) in enumerate((  # KEYS..., qkv_bias, num_tokens
                    (5, 12, 6, 0.0, 6, 2, False, 6), (6, 8, 8, 0.25, 4, 2, True, 5),
                    (3, 8, 5, 0.0, 4, 1, False, 5), (4, 6, 7, 0.0, 3, 3, False, 4),
                    (10, 8, 4, 0.0, 8, 4, False, 4)), 1))


def grouped(r, keys="interleave", values="interleave", scale="head_dim", mask="-inf before softmax",
            softmax_dim=-1, back=True, out=True, drop=None):
    """The output of the run ``r``'s module from its own layers, or one catalogued mistake's."""
    H, G, p = r.kwargs["num_heads"], r.kwargs["num_kv_groups"], r.kwargs["dropout"]
    hd, at = r.kwargs["d_out"] // H, lambda place, t: dropped(t, p) if p and drop == place else t
    q, k, v = (getattr(r.module, n)(r.x).unflatten(-1, (-1, hd)).transpose(1, 2)
               for n in ("W_query", "W_key", "W_value"))  # (b, H, T, hd), (b, G, T, hd) twice
    spread = {"interleave": lambda t: t.repeat_interleave(H // G, 1),  # block h // group_size
              "repeat": lambda t: t.repeat(1, H // G, 1, 1)}  # block h % num_kv_groups
    root = {"head_dim": hd, "kv_width": G * hd, "d_out": H * hd, "group_size": H // G, "none": 1}
    recipe = Recipe(scale=root[scale] ** 0.5, mask=mask, softmax_dim=softmax_dim,
                    dropout=lambda w: at("weights", w))
    context = at("heads", attend(q, spread[keys](k), at("values", spread[values](v)), recipe))
    context = (context.transpose(1, 2) if back else context).reshape(r.x.shape[0], r.tokens, -1)
    context = at("context", context)  # (b, T, d_out)
    return at("output", r.module.out_proj(context) if out else context)  # (b, T, d_out)


STEPS = ("split into num_heads and num_kv_groups blocks; repeat_interleave(group_size, dim=1); "
         "mask with -inf; divide by √head_dim; softmax over the last axis; merge; out_proj.")
MIXED = ("Keys and values are mapped to the heads in two different ways, one with repeat_interleave"
         " and one with repeat: a head scores one group's keys but mixes another group's values. "
         "Use repeat_interleave(self.group_size, dim=1) for both.")
AFTER = ("The causal mask is applied after the softmax: zeroed weights leave rows that do not sum "
         "to 1, -inf gives nan. Mask the scores with -inf before the softmax.")
AXIS = ("The softmax runs over the wrong axis. Each query's weights over the keys must sum to 1: "
        "torch.softmax(..., dim=-1) on scores of shape (b, num_heads, num_tokens, num_tokens).")
EVAL = (  # in eval mode: what each buggy reference changes, and what to tell the reader
    (dict(drop="weights"), "In eval mode your forward still drops attention weights: dropout is "
     "active. Use the module's layer, self.dropout(attn_weights), which is off in eval mode."),
    (dict(keys="repeat", values="repeat"), "Your heads read the wrong blocks, cycled 0, 1, 0, 1, "
     "... as repeat(1, group_size, 1, 1) cycles them: head h reads block h % num_kv_groups. Each "
     "block serves group_size consecutive heads, 0, 0, 1, 1, ...: repeat_interleave(group_size, "
     "dim=1) gives that. (Here {H} heads share {G} blocks.)"),
    (dict(keys="repeat"), MIXED), (dict(values="repeat"), MIXED),
    (dict(scale="kv_width"), "The scores are scaled by √(num_kv_groups × head_dim) = √{kv}, W_key's "
     "whole width. Each head's dot products have head_dim = {hd} terms: divide by "
     "self.head_dim ** 0.5."),
    (dict(scale="d_out"), "The scores are scaled by √d_out = √{d_out}, but each head's dot products"
     " have only head_dim = {hd} terms. Divide by self.head_dim ** 0.5."),
    (dict(scale="group_size"), "The scores are scaled by √group_size = √{n}. Sharing keys does not "
     "change a head's dot products: divide by self.head_dim ** 0.5."),
    (dict(scale="none"), "The scores are not scaled. Divide them by √head_dim "
     "(self.head_dim ** 0.5) before the softmax."),
    (dict(mask="none"), "There is no causal mask: every token also attends to the tokens after it. "
     "attn_scores.masked_fill(self.mask[:num_tokens, :num_tokens], -torch.inf) before the softmax."),
    (dict(mask="0 before softmax"), "The future positions are filled with 0 instead of -inf: a "
     "score of 0 still gets weight after the softmax (e⁰ = 1)."),
    (dict(mask="0 after softmax"), AFTER), (dict(mask="-inf after softmax"), AFTER),
    *((dict(softmax_dim=dim), AXIS) for dim in (-2, 1, 0)),
    (dict(back=False), "The heads were merged straight from (b, num_heads, num_tokens, head_dim): "
     "bring them back behind the tokens with .transpose(1, 2) first, then reshape."),
    (dict(out=False), "The forward never applies out_proj: return self.out_proj(context)."), STEPS)
BELONGS = "Dropout belongs on the attention weights, after the softmax: self.dropout(attn_weights)."
# fmt: on
BOOK = "GroupedQueryAttention"
PRAISE = (f"In eval mode your forward matches the reference from each instance's own layers in all "
          f"{len(CONFIGS)} configurations (one group, several, as many as heads; biases; inputs "
          "shorter than context_length), and in training mode it drops whole attention weights.")
START = (
    "Your forward still raises NotImplementedError, as the starting code does: replace the raise "
    "line with the pass itself. The first hint, just below the check, shows where to start."
)


def _source(function):
    try:
        return ast.dump(ast.parse(textwrap.dedent(inspect.getsource(function))))
    except (OSError, TypeError, SyntaxError):
        return None


def _raised(r, f):
    """What a forward that raised on this run most likely did, read from the call that failed."""
    name, shapes, _ = r.watch.failed or ("", [], [])
    text, T = str(r.error), f["T"]
    heads = {s[1] for s in shapes if len(s) == 4}  # the head axes of the tensors that met
    if T < f["ctx"] and f"({T})" in text and f"({f['ctx']})" in text:
        return "Your forward works on {ctx} tokens, but on {T} it raised {error}: the mask is " \
            "context_length × context_length; slice it, self.mask[:num_tokens, :num_tokens]."
    if f["n"] > 1 and any(f["n"] * T in s[-2:] for s in shapes):
        return "Your forward raised {error}: keys or values repeated on the token axis give " \
            "{n} × {T} tokens. Repeat on the block axis: dim=1 of (b, num_kv_groups, T, head_dim)."
    if name in ("view", "reshape") and f"size {2 * T * f['kv']}" in text:
        return "Your forward raised {error}: W_key and W_value give num_kv_groups={G} blocks, " \
            "not num_heads={H}: view the keys and values with self.num_kv_groups."
    if heads == {f["H"], f["G"] ** 2} and f["G"] ** 2 != f["H"]:
        return "Your forward raised {error}: each block was repeated num_kv_groups = {G} times. " \
            "Repeat it group_size = num_heads // num_kv_groups = {n} times: self.group_size."
    if heads == {f["H"], f["G"]} and shapes[0][-2:] == (T, T):
        return "Your forward raised {error}. The keys were expanded to one block per head, but " \
            "the values were not: expand them as the keys, repeat_interleave(self.group_size, dim=1)."
    if heads == {f["H"], f["G"]}:
        return "Your forward raised {error}. The queries have num_heads={H} blocks, the keys only "\
            "num_kv_groups={G}: repeat each key and value block once per head of its group, " \
            ".repeat_interleave(self.group_size, dim=1) on both."
    return None



def torch_attention(watch):
    """What PyTorch's attention does, and what to write here instead."""
    what = ("runs torch.nn.MultiheadAttention (or torch.nn.functional.multi_head_attention_forward, "
            "the function behind it), PyTorch's own attention layer" if watch.layer else
            "calls torch.nn.functional.scaled_dot_product_attention, PyTorch's fused kernel"
            + (", and with enable_gqa=True it gives each group's keys and values to its heads"
               if watch.grouped else ""))
    return (f"Your forward {what}: it computes the scores, mask, softmax, dropout and mix of "
            "values, so the steps this practice asks for are not yours. Chapter 5's practice "
            "hands attention to that kernel. Here, repeat each group's keys and values for its "
            "heads yourself, then write chapter 3's steps with @, masked_fill and torch.softmax.")


def _verdict(r):
    """The message for the first thing wrong in the run ``r``, or None."""
    kw = r.kwargs
    H, G, T = kw["num_heads"], kw["num_kv_groups"], r.tokens
    hd = kw["d_out"] // H
    f = dict(H=H, G=G, hd=hd, n=H // G, kv=G * hd, T=T, ctx=kw["context_length"],
             d_out=kw["d_out"], p=kw["dropout"], error=r.error_text)
    if r.stage == "constructor":
        return r.basics("GroupedQueryAttention")
    if r.calls:
        return (f"Your forward runs the book's own {r.calls[0]}, so its output is the book's, not "
                "yours. Write the pass from the module's own layers (self.W_query, self.W_key, "
                "self.W_value, self.out_proj).")
    if isinstance(r.error, NotImplementedError) and r.stage == "forward":
        return START
    if r.watch.layer or r.watch.kernel:
        return torch_attention(r.watch)
    missing = [n for n in ("W_query", "W_key", "W_value") if not hasattr(r.module, n)]
    if missing:
        return (f"The check could not use your instance's {' and '.join(filter(None, (', '.join(missing[:-1]), missing[-1])))}: it computes the "
                "expected output from W_query, W_key and W_value; keep those layers and names.")
    if (width := r.module.W_key.weight.shape[0]) != G * hd:
        return (f"Your W_key maps d_in={kw['d_in']} to {width} columns, one block per head. Keys "
                "and values have one block per group: num_kv_groups * head_dim columns, here "
                f"{G * hd}. Keep the constructor of GroupedQueryAttention.")
    if r.stage == "forward":
        return (_raised(r, f) or r.basics("")).format(**f)
    if getattr(r.output, "shape", None) in ((2, H, T, hd), (2, T, H, hd)):
        return (f"Your forward returned shape {tuple(r.output.shape)}: the heads are still "
                "separate. Transpose back to (b, num_tokens, num_heads, head_dim), then merge.")
    return r.basics("") or judge(r, grouped, EVAL, f, BELONGS)


def _not_mine(cls):
    """What to say when ``cls`` is no class of the reader's own, or None."""
    name = getattr(cls, "__name__", "")
    if wrong := not_a_class(cls, "check_gqa_forward", "MyGroupedQueryAttention", BOOK):
        return wrong
    if cls is Book:
        return (f"This is the book's own {BOOK}, so there is nothing of yours to check. Define "
                f"class MyGroupedQueryAttention({BOOK}): and write its forward yourself.")
    if cls.forward in (Book.forward, torch.nn.Module.forward):
        return f"{name} does not define forward, so it runs the book's {BOOK}.forward or none " \
            "at all. Write def forward(self, x): inside the class, with the steps of the pass."
    if _source(cls.forward) == _source(Book.forward):
        return (f"{name}.forward is the book's {BOOK}.forward, line for line. Write the pass "
                f"yourself, in your own subclass of {BOOK}; the hints help if you are stuck.")
    return None


@never_raises
def check_gqa_forward(cls):
    """Check a grouped-query attention class: build it in several configurations and compare its
    output with references computed from each instance's own layers."""
    if wrong := _not_mine(cls):
        return CheckResult(False, wrong)
    return check_class(cls, CONFIGS, _verdict) or CheckResult(True, PRAISE)


gqa_forward = Exercise(
    checker=check_gqa_forward,
    hints=(
        "Project and split as in chapter 3, but with two block counts. self.W_query(x) has "
        "self.num_heads blocks of self.head_dim columns: view it as (b, num_tokens, "
        "self.num_heads, self.head_dim). self.W_key(x) and self.W_value(x) have only "
        "self.num_kv_groups blocks. Then .transpose(1, 2) all three, so the blocks come "
        "before the tokens.",
        "Now give every head the keys and values of its group. Head h belongs to group "
        "h // self.group_size: the first group_size heads share block 0, the next group_size "
        "block 1, and so on. One call on the block axis (dim=1) repeats each block in place, "
        "group_size times; the predict-and-reveal above compared it with another that cycles.",
        "From here it is chapter 3's attention: scores queries @ keys.transpose(2, 3); fill "
        "self.mask[:num_tokens, :num_tokens] with -torch.inf; softmax over the last axis after "
        "dividing by self.head_dim ** 0.5; self.dropout; mix the values; transpose back, "
        "reshape to (b, num_tokens, self.d_out); return self.out_proj(context).",
    ),
    solution_code=textwrap.dedent(
        """\
        class MyGroupedQueryAttention(GroupedQueryAttention):
            def forward(self, x):
                b, num_tokens, _ = x.shape
                queries = self.W_query(x)  # (b, T, d_out)
                keys = self.W_key(x)  # (b, T, num_kv_groups * head_dim)
                values = self.W_value(x)  # (b, T, num_kv_groups * head_dim)

                # Queries: one block per head. Keys, values: one per group.
                H, G = self.num_heads, self.num_kv_groups
                queries = queries.view(b, num_tokens, H, self.head_dim)
                keys = keys.view(b, num_tokens, G, self.head_dim)
                values = values.view(b, num_tokens, G, self.head_dim)
                queries = queries.transpose(1, 2)  # (b, H, T, head_dim)
                keys = keys.transpose(1, 2)  # (b, G, T, head_dim)
                values = values.transpose(1, 2)  # (b, G, T, head_dim)

                # Each group's block once per head of the group, in place.
                keys = keys.repeat_interleave(self.group_size, dim=1)
                values = values.repeat_interleave(self.group_size, dim=1)
                # keys and values are now (b, H, T, head_dim)

                attn_scores = queries @ keys.transpose(2, 3)  # (b, H, T, T)
                future = self.mask[:num_tokens, :num_tokens]  # (T, T)
                attn_scores = attn_scores.masked_fill(future, -torch.inf)
                scaled = attn_scores / self.head_dim**0.5
                attn_weights = self.dropout(torch.softmax(scaled, dim=-1))

                context = attn_weights @ values  # (b, H, T, head_dim)
                context = context.transpose(1, 2)  # (b, T, H, head_dim)
                context = context.reshape(b, num_tokens, self.d_out)
                return self.out_proj(context)  # (b, T, d_out)


        check_gqa_forward(MyGroupedQueryAttention)
        """
    ),
)
