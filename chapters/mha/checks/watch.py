"""What a check watches torch do (:class:`Watch`): its attention, and the random draws of a
dropout, which the check makes the same each run (:func:`dropped`, whatever the way written)."""

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

KERNEL, LAYERS = F.scaled_dot_product_attention, (F.multi_head_attention_forward,)


def kept(t):
    """The check's dropout mask for ``t``: every other entry of its last two axes, whatever p (a
    tensor of fewer axes: of its one row)."""
    rows, cols = t.shape[-2:] if t.dim() > 1 else (1, t.numel())
    mask = (torch.arange(rows)[:, None] + torch.arange(cols)) % 2 == 0
    return mask if t.dim() > 1 else mask.reshape(t.shape)


def dropped(t, p):
    """``t`` after the check's dropout of probability ``p``: :func:`kept`, scaled."""
    return t * kept(t) / (1 - float(p)) if p else t


def sdpa(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, **kw):
    """:data:`KERNEL`, with :func:`dropped` on its attention weights (its arguments named as
    torch names them: a reader may pass query=, key=, value=)."""
    if not dropout_p:
        return KERNEL(query, key, value, attn_mask, 0.0, is_causal, scale=scale, **kw)
    eye = torch.eye(key.shape[-2], dtype=query.dtype).expand(*key.shape[:-1], -1)  # the weights
    weights = KERNEL(query, key, eye, attn_mask, 0.0, is_causal, scale=scale, **kw)
    return dropped(weights, dropout_p) @ value  # (..., num_tokens, head_dim)


def _dropout(t, p=0.5, training=True, inplace=False, train=None):  # F.dropout, torch.dropout
    return dropped(t, p) if (training if train is None else train) else t


#: The comparisons of a random draw a hand-written dropout makes: "u < c" is true with chance c.
BELOW, ABOVE = {"lt", "le", "less", "less_equal"}, {"gt", "ge", "greater", "greater_equal"}
#: A draw's options, none of which changes its numbers.
DRAWS = set("size dtype device generator layout requires_grad memory_format pin_memory".split())
#: The check's uniform draw: just below 1 where :func:`kept`, just above 0 elsewhere, so what a
#: reader computes from it (u - p > 0, floor(u + 1 - p)) reads as a real draw would, p = 0 too.
HIGH, LOW = 1 - 2**-8, 2**-8


def chance(value):
    """A probability given as a number or as a tensor of one repeated value, else None."""
    if isinstance(value, torch.Tensor):
        first = value.flatten()[:1]
        return float(first) if first.numel() and bool((value == first).all()) else None
    return float(value) if isinstance(value, (int, float)) else None


def mask_for(like, true_chance, p):
    """The check's draw of a mask true with ``true_chance``: always or never when that is 1 or 0;
    :func:`kept` when it is the chance of keeping (1 - p), the other entries when it is the chance
    of dropping (p: at 0.5, read as keeping); else all true or false, no dropout of rate p."""
    keep, c = kept(like).expand(like.shape), true_chance
    if c is None or c <= 0 or c >= 1 or min(abs(c - p), abs(c - 1 + p)) > 1e-6:
        return torch.full(like.shape, c is not None and c >= 0.5)
    return keep if abs(c - (1 - p)) < 1e-6 else ~keep


class Watch(TorchFunctionMode):
    """While on, notes in ``seen`` torch's attention ("kernel"; "grouped": enable_gqa; "layer")
    and "dropout", in ``failed`` the first failing call's name and shapes; dropout (F.dropout, a
    random mask or a comparison of a random draw with p) is :func:`dropped`, the same weights each
    run, at rate ``p``; the kernel, :func:`sdpa` + bump."""

    def __init__(self, bump=0.0, p=0.5):
        super().__init__()
        self.bump, self.p, self.seen, self.failed, self.draws = bump, float(p), set(), None, {}

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs, name = kwargs or {}, getattr(func, "__name__", "")
        self.seen |= {"layer"} if func in LAYERS else set()
        try:
            if func in (F.dropout, torch.dropout):
                self.seen.add("dropout")
                return _dropout(*args, **kwargs)
            if self.is_draw(name, args, kwargs):
                return self.drawn(name, args, kwargs)
            drawn, name = [a for a in args[:2] if id(a) in self.draws], name.strip("_")  # __lt__
            if name in BELOW | ABOVE and len(args) == 2 and drawn:  # u < c, c > u, u >= c, ...
                first, c = args[0] is drawn[0], chance(args[args[0] is drawn[0]])
                below = (name in BELOW) == first
                return mask_for(drawn[0], c if below or c is None else 1 - c, self.p)
            if func is KERNEL:
                self.seen |= {"kernel", "grouped"} if kwargs.get("enable_gqa") else {"kernel"}
                return sdpa(*args, **kwargs) + self.bump
            return func(*args, **kwargs)
        except Exception:
            shapes = [tuple(a.shape) for a in (*args, *kwargs.values()) if torch.is_tensor(a)]
            self.failed = self.failed or (getattr(func, "__name__", ""), shapes)
            raise

    @staticmethod
    def is_draw(name, args, kwargs):
        """A call that draws random numbers of [0, 1), or a Bernoulli mask: not nn.init's
        uniform_(-bound, bound), nor a draw with options that change its numbers."""
        if "bernoulli" in name:
            return True
        if name == "uniform_":
            bounds = [*args[1:3], kwargs.get("from", 0), kwargs.get("to", 1)][:2]
            if [float(b) for b in bounds] != [0, 1]:
                return False
            kwargs = kwargs.keys() - {"from", "to"}
        return name in ("rand_like", "rand", "uniform_") and not set(kwargs) - DRAWS

    def drawn(self, name, args, kwargs):
        """A random draw, as the check makes it: uniform numbers, :data:`HIGH` where :func:`kept`
        and :data:`LOW` elsewhere (a comparison with p reads them as a mask), or a Bernoulli
        mask of its chance."""
        self.seen.add("dropout")
        if name == "rand":
            size = args[0] if len(args) == 1 and not isinstance(args[0], int) else args
            like = torch.empty(kwargs.get("size", size), dtype=kwargs.get("dtype"))
        else:
            like = args[0]
        if name.startswith("bernoulli"):
            given = kwargs.get("p", args[1] if len(args) > 1 else 0.5 if name[-1] == "_" else like)
            draw = mask_for(like, chance(given), self.p).to(like.dtype)
        else:
            draw = torch.where(kept(like).expand(like.shape), HIGH, LOW).to(like.dtype)
        draw = like.copy_(draw) if name.endswith("_") else draw  # in place, as the reader asked
        self.draws[id(draw)] = draw
        return draw
