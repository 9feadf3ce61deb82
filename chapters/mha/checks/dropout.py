"""Where a module's dropout acts, read from its training-mode outputs alone.

Dropout on the attention weights has three signs, whatever the code looks like:

* the output is finite (dropout on masked scores makes ``-inf × 0 = nan``);
* its mean over many seeded calls is the eval-mode output: within four standard errors of
  that mean, plus ``1e-4`` (``E[mask / (1 - p)] = 1``);
* what is dropped is whole weights. Token 0 sees only itself, so its weight is 1 and each
  head's context is its value: in training every head's block of token 0's context must be
  0, or the eval-mode block times ``1 / (1 - p)``, all of its numbers alike.

The context is read back from the output through ``out_proj`` (a square linear layer), so
dropout before and after ``out_proj`` can be told apart. :func:`dropout_place` names what it
saw; each chapter says where dropout belongs in its own words.
"""

import torch

#: Seeded training-mode calls the reading makes.
CALLS = 48

#: The tolerance for "the same number": float32 rounding, magnified a little by undoing out_proj
#: (``ATOL`` is relative to the largest number of the eval-mode tensor compared with).
RTOL, ATOL = 1e-3, 1e-3

#: Where dropout went, for each place :func:`dropout_place` can name.
PLACES = {
    "nan": "In training mode your output has nan in it: dropout reached the scores after "
    "the mask, where a masked -inf times a dropped 0 is nan.",
    "scores": "In training mode a token that sees only itself keeps its whole value, never "
    "dropped nor scaled: dropout acts before the softmax (on the scores), which "
    "normalises it away.",
    "output": "In training mode single numbers of your final output are dropped: dropout comes "
    "after out_proj.",
    "context": "In training mode single numbers of the context are dropped, after the weights "
    "have mixed the values: dropout acts on the merged context (or each head's context).",
    "values": "In training mode a token that sees only itself keeps some numbers of its value "
    "and loses others: dropout acts on the values, not on whole attention weights.",
    "twice": "In training mode a kept weight is scaled by 1 / (1 - p) twice: dropout is "
    "applied twice.",
    "unscaled": "In training mode a kept weight is not scaled by 1 / (1 - p), so the average "
    "output is smaller than in eval mode: use nn.Dropout (or F.dropout), which rescales.",
    "noise": "In training mode your output changes from call to call, but not by dropping "
    "weights: a token that sees only itself gets a value that is neither 0 nor its value "
    "times 1 / (1 - p). That is noise, not dropout.",
    "same every call": "In training mode every call gives the same output, different from "
    "eval mode: the same numbers are dropped each time. Dropout draws a new mask on each call: "
    "do not reseed or store a mask.",
    "not a tensor": "In training mode your forward does not return a tensor of the eval-mode "
    "output's shape.",
    "biased": "In training mode single weights are dropped, but the average output over "
    "{calls} calls is not the eval-mode output: something else changes in training.",
}


def _close(got, full, scale=1.0):
    """Elementwise: ``got`` is ``full * scale``, to :data:`RTOL` and :data:`ATOL`."""
    atol = ATOL * max(float(full.abs().max()), 1e-6)
    return torch.isclose(got, (full * scale).expand_as(got), rtol=RTOL, atol=atol)


def _either(got, full, scale, whole=False):
    """Elementwise (or, ``whole``, over the last axis at once): ``got`` is 0 or
    ``full * scale``."""
    zero, kept = _close(got, full, 0.0), _close(got, full, scale)
    return zero.all(-1) | kept.all(-1) if whole else zero | kept


def _context(module, output):
    """The context ``out_proj`` made ``output`` from, or ``output`` itself without one."""
    layer = getattr(module, "out_proj", None)
    weight = getattr(layer, "weight", None)
    if (
        not isinstance(weight, torch.Tensor)
        or weight.dim() != 2
        or weight.shape[0] != weight.shape[1]
    ):
        return output.double()
    bias = layer.bias if getattr(layer, "bias", None) is not None else 0
    return (output.double() - bias.double()) @ torch.linalg.inv(weight.double()).T


def training_outputs(module, x, calls=CALLS):
    """``calls`` outputs in training mode, seeds 1 to ``calls``; the reader's random state and
    the module's modes are restored. Raises what the forward raises."""
    modes = [(m, m.training) for m in module.modules()]
    outputs = []
    try:
        for seed in range(1, calls + 1):
            with torch.random.fork_rng(devices=[]), torch.no_grad():
                torch.manual_seed(seed)
                module.train()
                outputs.append(module(x))
    finally:
        for m, mode in modes:
            m.training = mode
    return outputs


@torch.no_grad()
def dropout_place(module, outputs, evaluated, num_heads, p):
    """``None`` when ``outputs`` (training mode) drop whole attention weights, else what they
    show: "none" (every call gives the eval output ``evaluated``), "same every call", or a key
    of :data:`PLACES`."""
    if all(torch.equal(o, evaluated) for o in outputs):
        return "none"
    if all(torch.equal(o, outputs[0]) for o in outputs):
        return "same every call"
    stack = torch.stack(outputs).double()  # (calls, b, num_tokens, d_out)
    if not bool(stack.isfinite().all()):
        return "nan"
    scale = 1 / (1 - p)
    if bool(_either(stack, evaluated.double(), scale).all()):
        return "output"
    context = _context(module, stack)  # (calls, b, num_tokens, d_out)
    full = _context(module, evaluated)  # (b, num_tokens, d_out)
    if bool(_either(context, full, scale).all()):
        return "context"
    first, whole = context[:, :, 0], full[:, 0]  # (calls, b, d_out), (b, d_out)
    heads = first.unflatten(-1, (num_heads, -1))  # (calls, b, num_heads, head_dim)
    value = whole.unflatten(-1, (num_heads, -1))  # (b, num_heads, head_dim)
    if bool(_close(heads, value).all()):
        return "scores"
    for name, factor in (("unscaled", 1.0), ("twice", scale**2)):
        if bool(_either(heads, value, factor, whole=True).all()):
            return name
    if not bool(_either(heads, value, scale, whole=True).all()):
        return "values" if bool(_either(heads, value, scale).all()) else "noise"
    error = (stack.mean(0) - evaluated.double()).abs()
    standard_error = stack.std(0) / len(outputs) ** 0.5
    if not bool((error <= 4 * standard_error + ATOL).all()):
        return "biased"
    return None


def dropout_story(place, belongs):
    """What the reader hears: where dropout went (:data:`PLACES`), then where it belongs."""
    return f"{PLACES[place].format(calls=CALLS)} {belongs}"
