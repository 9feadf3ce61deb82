"""Chapter 3's answers beyond their eval-mode values: what raised (:data:`EARLY`), the
training-mode rows (:data:`TRAINED`: where dropout went, or how it is not self.dropout) and
:data:`STAGES`, where an answer no entry explains first differs."""

from functools import partial

from .core import Step
from .reference import same
from .runs import LAYERS, UNTRANSPOSED, Run, keys_swapped, untransposed
from .split_mistakes import HARD, split


def other_head_count(f):
    """A forward that raises but works for k heads of the same width: ``{"k": k}``, or None."""
    head_dim = f["d_out"] // f["num_heads"]
    for k in (k for k in range(2, 9) if f["raised"] and k != f["num_heads"]):
        kwargs = dict(f["run"].kwargs, d_out=k * head_dim, num_heads=k)
        run = Run(type(f["run"].module), kwargs, f["T"], f["run"].seed)
        if run.error is None and same(run.output, split(run)):
            return {"k": k}
    return None


def at(step, r):
    """A :class:`.core.Step`'s right tensors on run ``r``: whole, and head 1's as a loop has it."""
    found, _ = {}, r.module.eval()
    found["output"] = split(r, steps=found)
    forms = found[step] if isinstance(found[step], tuple) else (found[step],)
    return [*forms, *(t[:, 0] for t in forms if t.dim() == 4)]


# fmt: off
EARLY = (  # before the output's values: what the forward built, or the call that failed
    LAYERS,
    (keys_swapped, "Your scores product failed ({error}): the keys were transposed on other axes "
     "than the last two (1 and 2, or 1 and 3). Swap the last two: keys.transpose(2, 3)."),
    (untransposed, UNTRANSPOSED),
    (lambda f: f["raised"] and "matmul" in f["op"] and f["shapes"][1:] == [(f["d_out"], f["d_in"])],
     "Your forward multiplied x by a layer's weight, (d_out, d_in), and failed ({error}): a "
     "layer computes x @ weight.T + bias. Call it: self.W_query(x)."),
    (other_head_count, HARD))
BELONGS = "Dropout belongs on the attention weights, after the softmax: self.dropout(attn_weights)."
DROPS = {"scores": "scores, before the softmax", "masked": "masked scores: -inf × 0 is nan",
         "values": "values, not weights",  # Recipe.dropout_at: where dropout went, in words
         "context": "the context (weights @ values), not the weights", "output": "the output"}
TRAINED = (  # in training mode: no dropout, dropout in another place, or twice
    (dict(), "In training mode no attention weight is ever dropped. " + BELONGS),
    *((dict(drop=True, dropout_at=at), f"Your dropout drops {what}. {BELONGS}")
      for at, what in DROPS.items()),
    (dict(drop="twice"), "Your dropout runs twice on the weights: once is enough."),
    (dict(drop="unscaled"), "Your dropout does not scale the kept weights by 1 / (1 - p), as "
     "self.dropout does: each weight keeps its expected value only then."),
    (dict(drop="inverted"), "Your dropout keeps a weight with chance p, not 1 - p: keep where "
     "rand >= p, or use self.dropout."),
    (dict(drop="over p"), "Your dropout scales the kept weights by 1 / p: by 1 / (1 - p), one "
     "over the chance of keeping a weight, as self.dropout does."),
    (dict(drop="renormalised"), "Your weights are divided by their sum after dropout: its 1 / "
     "(1 - p) is the whole correction. self.dropout(attn_weights), then nothing."),
    *((dict(drop=q), "Your dropout's rate is not the module's dropout={dropout}: use self.dropout,"
       " built with it.") for q in (0.1, 0.2, 0.5)))
STAGES = (  # where an unknown answer first differs, and the hint on that step
    Step("the scores", 2, partial(at, "scores")),
    Step("the attention weights (mask, scale, softmax)", 3, partial(at, "weights")),
    Step("each head's context (weights @ values)", 2, partial(at, "context")),
    Step("the merged context (head 1's columns first)", 2, partial(at, "merged")),
    Step("the output (out_proj)", 3, partial(at, "output")))
# fmt: on
