"""Chapter 2's exercise: two heads, two-dimensional context vectors."""


import torch

from .core import CheckResult, Exercise, Mistake, describe_error, evaluating, first_mistake, never_raises

# ---------------------------------------------------------------------------------------------

#: The exercise keeps two heads and asks for two-dimensional context vectors.
TWO_DIM_NUM_HEADS = 2
TWO_DIM_WIDTH = 2
#: The checker's own probe: a batch shaped like the example sentence's, with values of its own.
TWO_DIM_PROBE_BATCH, TWO_DIM_PROBE_TOKENS, TWO_DIM_PROBE_SEED = 2, 6, 2024
TWO_DIM_PROJECTIONS = ("W_query", "W_key", "W_value")


def _two_dim_close(a, b):
    """Equal shapes and values up to float32 rounding."""
    return (
        isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.shape == b.shape
        and torch.allclose(a, b, rtol=1e-4, atol=1e-5)
    )


def _two_dim_is_head(module):
    """Whether ``module`` has its own query, key and value projections, as a ``CausalAttention`` has."""
    return isinstance(module, torch.nn.Module) and all(
        isinstance(getattr(module, name, None), torch.nn.Linear) for name in TWO_DIM_PROJECTIONS
    )


def _two_dim_causal_attention(head, x):
    """What ``head`` computes on ``x`` if it is unchanged: causal attention from its own weights."""
    linear = torch.nn.functional.linear
    queries = linear(x, head.W_query.weight, head.W_query.bias)  # (b, num_tokens, d_out)
    keys = linear(x, head.W_key.weight, head.W_key.bias)  # (b, num_tokens, d_out)
    values = linear(x, head.W_value.weight, head.W_value.bias)  # (b, num_tokens, d_out)
    num_tokens = x.shape[1]
    future = torch.ones(num_tokens, num_tokens, dtype=torch.bool).triu(diagonal=1)  # (num_tokens, num_tokens)
    scores = (queries @ keys.transpose(1, 2)).masked_fill(future, -torch.inf)  # (b, num_tokens, num_tokens)
    weights = torch.softmax(scores / keys.shape[-1] ** 0.5, dim=-1)  # (b, num_tokens, num_tokens)
    return weights @ values  # (b, num_tokens, d_out)


def _two_dim_kind(value):
    """``value``'s type with an article, as a reader would name it: "an int", "a torch.Size"."""
    package = type(value).__module__.split(".")[0]
    name = type(value).__name__ if package == "builtins" else f"{package}.{type(value).__name__}"
    return ("an " if name[:1].lower() in "aeiou" else "a ") + name


def _two_dim_call(function, *args):
    """``function(*args)``, or the exception it raised."""
    try:
        return function(*args)
    except Exception as error:
        return error


class TwoDimAttempt:
    """Everything the chapter 2 check observes about the reader's answer, gathered once.

    The reader's module is run (in eval mode, under ``no_grad``, its mode restored) on the
    checker's own probe batch: once as a whole with hooks that record what each head receives,
    and each head once on its own. Each head's correct output is computed independently from
    that head's own weights, so the answer is compared with what *its* heads should compute.
    """

    def __init__(self, answer):
        self.answer = answer
        self.module = answer if isinstance(answer, torch.nn.Module) else None
        self.heads = self._find_heads()
        self.x = self.output = self.error = None
        self.received, self.own_outputs, self.references, self.leaks = [], [], [], []
        if self.heads and all(_two_dim_is_head(h) for h in self.heads):
            with evaluating(self.module):
                self._observe()

    def _find_heads(self):
        """The module's ``heads`` as a list, or ``None`` if it has no list of heads."""
        try:
            heads = getattr(self.module, "heads", None)
            if isinstance(heads, (torch.nn.ModuleList, list, tuple)):
                return list(heads)
        except Exception:
            pass
        return None

    def _observe(self):
        first = self.heads[0].W_query
        generator = torch.Generator().manual_seed(TWO_DIM_PROBE_SEED)
        shape = (TWO_DIM_PROBE_BATCH, TWO_DIM_PROBE_TOKENS, first.in_features)
        self.x = torch.rand(shape, generator=generator, dtype=first.weight.dtype)  # (b, num_tokens, d_in)
        self.references = [_two_dim_call(_two_dim_causal_attention, head, self.x) for head in self.heads]
        if self.context_length is not None and self.context_length < TWO_DIM_PROBE_TOKENS:
            return  # the heads cannot take the probe at all; the catalogue says why
        new_last_token = self.x.clone()
        new_last_token[:, -1] = torch.rand(shape[0], shape[2], generator=generator, dtype=self.x.dtype)
        for head in self.heads:
            before, after = _two_dim_call(head, self.x), _two_dim_call(head, new_last_token)
            self.own_outputs.append(before)
            self.leaks.append(
                isinstance(before, torch.Tensor) and isinstance(after, torch.Tensor)
                and before.shape == after.shape and before.dim() == 3
                and not torch.allclose(before[:, :-1], after[:, :-1], rtol=1e-4, atol=1e-5, equal_nan=True)
            )
        self._run_with_hooks()

    def _run_with_hooks(self):
        self.received = [[] for _ in self.heads]
        handles = []

        def recorder(position):
            def record(module, args, kwargs):
                self.received[position].append(args[0] if args else next(iter(kwargs.values()), None))
            return record

        try:
            for position, head in enumerate(self.heads):
                handles.append(head.register_forward_pre_hook(recorder(position), with_kwargs=True))
            self.output = self.module(self.x)
        except Exception as error:
            self.error = error
        finally:
            for handle in handles:
                handle.remove()

    # -- facts the messages quote -----------------------------------------------------------

    @property
    def got(self):
        return self.answer.__name__ if isinstance(self.answer, type) else type(self.answer).__name__

    @property
    def given(self):
        return "None" if self.answer is None else _two_dim_kind(self.answer)

    @property
    def answer_shape(self):
        return tuple(self.answer.shape)

    @property
    def num_heads(self):
        return len(self.heads)

    @property
    def heads_phrase(self):
        return "1 head" if self.num_heads == 1 else f"{self.num_heads} heads"

    @property
    def head_width(self):
        return self.heads[0].W_value.out_features

    @property
    def context_length(self):
        lengths = []
        for head in self.heads:
            mask = getattr(head, "mask", None)
            if isinstance(mask, torch.Tensor) and mask.dim() == 2:
                lengths.append(mask.shape[0])
        return min(lengths) if lengths else None

    @property
    def probe_shape(self):
        return tuple(self.x.shape)

    @property
    def error_text(self):
        return describe_error(self.error)

    @property
    def output_shape(self):
        return tuple(self.output.shape)

    @property
    def width(self):
        return self.output.shape[-1]

    @property
    def output_kind(self):
        return _two_dim_kind(self.output)

    @property
    def output_length(self):
        return len(self.output)

    @property
    def concatenated(self):
        """The correct output: the heads' correct outputs side by side."""
        return torch.cat(self.references, dim=-1)  # (b, num_tokens, num_heads * d_out)

    @property
    def not_a_head(self):
        position = next(p for p, head in enumerate(self.heads) if not _two_dim_is_head(head))
        return f"Head {position + 1} is a {type(self.heads[position]).__name__}"

    @property
    def sharing(self):
        first, second = self.heads[:2]
        if first is second:
            return "they are the same object, as [head] * 2 makes"
        pairs = [(getattr(first, n), getattr(second, n)) for n in TWO_DIM_PROJECTIONS]
        if any(a.weight is b.weight or a.weight.data_ptr() == b.weight.data_ptr() for a, b in pairs):
            return "they use the very same weight tensors"
        if all(torch.equal(a.weight, b.weight) for a, b in pairs):
            return "one is a copy of the other"
        return None

    @property
    def wrongly_fed(self):
        """``(head number, what it received)`` for the first head not given the wrapper's x."""
        for position, inputs in enumerate(self.received):
            for received in inputs:
                if not (isinstance(received, torch.Tensor) and received.shape == self.x.shape
                        and torch.equal(received, self.x)):
                    return position + 1, self._describe_input(received)
        return None

    def _describe_input(self, received):
        if not isinstance(received, torch.Tensor):
            return _two_dim_kind(received)
        for position, output in enumerate(self.own_outputs):
            if _two_dim_close(received, output):
                return f"head {position + 1}'s output (shape {tuple(received.shape)})"
        return f"a tensor of shape {tuple(received.shape)} that is not x"

    @property
    def fed_head(self):
        return self.wrongly_fed[0]

    @property
    def fed_what(self):
        return self.wrongly_fed[1]

    @property
    def leaking_head(self):
        return self.leaks.index(True) + 1

    @property
    def changed(self):
        """``(head number, its own output)`` for the first head whose output is not causal attention."""
        pairs = enumerate(zip(self.own_outputs, self.references), start=1)
        return next(((n, own) for n, (own, ref) in pairs if not _two_dim_close(own, ref)), None)

    @property
    def changed_head(self):
        return self.changed[0]

    @property
    def changed_how(self):
        own = self.changed[1]
        if isinstance(own, Exception):
            return f"run on its own, it raised {describe_error(own)}"
        return (
            "its output differs from the softmax of its own queries and keys, causally masked and "
            "scaled by √d_out, applied to its own values (perhaps its scaling or its softmax was changed)"
        )

    def heads_trim_their_output(self):
        return any(
            isinstance(own, torch.Tensor) and own.dim() == 3 and own.shape[-1] < head.W_value.out_features
            for own, head in zip(self.own_outputs, self.heads)
        )

    def output_keeps_some_columns(self):
        """The output is made of some (not all) of the columns the heads compute."""
        if not (self.output_is_3d() and self.width < self.concatenated.shape[-1]):
            return False
        columns = self.concatenated.unbind(-1)
        return all(any(_two_dim_close(out, col) for col in columns) for out in self.output.unbind(-1))

    def output_is_3d(self):
        output = self.output
        return isinstance(output, torch.Tensor) and output.dim() == 3 and output.shape[:2] == self.x.shape[:2]

    @property
    def stack_axis(self):
        stacks = ((d, _two_dim_call(torch.stack, self.references, d)) for d in range(4))
        return next((d for d, stacked in stacks if _two_dim_close(self.output, stacked)), None)

    @property
    def cat_axis(self):
        return next((d for d in (0, 1) if _two_dim_close(self.output, torch.cat(self.references, dim=d))), None)

    @property
    def axis_name(self):
        return ("batch axis", "token axis")[self.cat_axis]

    @property
    def axis_things(self):
        return ("sequences", "tokens")[self.cat_axis]

    @property
    def combined(self):
        stacked = torch.stack(self.references)  # (num_heads, b, num_tokens, d_out)
        if _two_dim_close(self.output, stacked.sum(0)):
            return "added"
        if _two_dim_close(self.output, stacked.mean(0)):
            return "averaged"
        return None

    def output_mixes_heads(self):
        """The output is an affine function of the concatenated heads, fitted exactly on the probe."""
        if not self.output_is_3d() or _two_dim_close(self.output, self.concatenated):
            return False
        inputs = self.concatenated.flatten(0, 1).double()  # (b * num_tokens, num_heads * d_out)
        inputs = torch.cat([inputs, torch.ones(len(inputs), 1, dtype=inputs.dtype)], dim=1)
        targets = self.output.flatten(0, 1).double()  # (b * num_tokens, width)
        if len(inputs) < 2 * inputs.shape[1]:
            return False  # too few probe rows for the fit to mean anything
        fit = torch.linalg.lstsq(inputs, targets).solution
        residual = (inputs @ fit - targets).norm()
        return bool(residual <= 1e-5 * (targets.norm() + 1e-12))

    def is_correct(self):
        """Two heads fed the same x, whose correct outputs, side by side, make 2-D context vectors."""
        try:
            return (
                self.error is None and self.num_heads == TWO_DIM_NUM_HEADS and self.wrongly_fed is None
                and _two_dim_close(self.output, self.concatenated) and self.width == TWO_DIM_WIDTH
            )
        except Exception:
            return False


def _fill(message, attempt):
    """``message`` with ``{fact}`` replaced by the attempt's facts ("?" for one it cannot state)."""

    class Facts(dict):
        def __missing__(self, key):
            try:
                return getattr(attempt, key)
            except Exception:
                return "?"

    return message.format_map(Facts())


_KEEP_FORWARD = "torch.cat([head(x) for head in self.heads], dim=-1)"
_CHANGE_ARGUMENTS = "change only the arguments of the MultiHeadAttentionWrapper(...) call"

#: Known mistakes, most specific first: the first one recognised is the one the reader hears about.
TWO_DIM_MISTAKES = (
    Mistake(
        "passed the class",
        "You passed the class {got} itself, not a wrapper built from it. Build one, for example "
        "mha = MultiHeadAttentionWrapper(d_in=3, d_out=..., context_length=6, dropout=0.0, num_heads=2), "
        "and pass mha.",
        lambda a: isinstance(a.answer, type),
    ),
    Mistake(
        "passed a tensor",
        "You passed a tensor of shape {answer_shape}, probably the wrapper's output. The check needs the "
        "wrapper itself, to run it on its own inputs and look at its heads: check_two_dim_output(mha), "
        "not check_two_dim_output(mha(batch)).",
        lambda a: isinstance(a.answer, torch.Tensor),
    ),
    Mistake(
        "not a module",
        "check_two_dim_output needs the wrapper you built (a torch.nn.Module), but it was given {given}. "
        "Build mha = MultiHeadAttentionWrapper(...) and pass mha.",
        lambda a: a.module is None,
    ),
    Mistake(
        "the weight-split class",
        "A {got} keeps its heads packed into one set of weight matrices (the weight splits of this "
        "book's chapter 3), not in a list of separate heads, and its d_out is the width of the whole "
        "output. The exercise keeps the class: build a MultiHeadAttentionWrapper and change only its "
        "arguments.",
        lambda a: a.heads is None and _two_dim_is_head(a.module) and hasattr(a.module, "num_heads"),
    ),
    Mistake(
        "a single head",
        "This is a single attention head (a {got}), not a wrapper of heads. The exercise keeps "
        "num_heads=2: build a MultiHeadAttentionWrapper with two heads and make each head narrower.",
        lambda a: _two_dim_is_head(a.module) and a.heads is None,
    ),
    Mistake(
        "not the wrapper",
        "A {got} has no list of heads (no .heads), so it is not the MultiHeadAttentionWrapper the "
        "exercise asks for. Keep the class as it is and " + _CHANGE_ARGUMENTS + ".",
        lambda a: not a.heads,
    ),
    Mistake(
        "a head that is not an attention head",
        "{not_a_head}, not an attention head with its own W_query, W_key and W_value. Each head's role "
        "must stay as it was: every entry of heads is a CausalAttention, so " + _CHANGE_ARGUMENTS + ".",
        lambda a: not all(_two_dim_is_head(h) for h in a.heads),
    ),
    Mistake(
        "num_heads changed",
        "Your wrapper has {heads_phrase}, but the exercise keeps num_heads=2. The number of heads is "
        "how many separate views of the sentence the layer takes, so changing it changes the layer. "
        "Keep num_heads=2 and make each head narrower instead.",
        lambda a: a.num_heads != TWO_DIM_NUM_HEADS,
    ),
    Mistake(
        "one head object repeated",
        "Head 1 and head 2 share one set of weights ({sharing}), so they always compute the same thing: "
        "the two heads' coordinates are always equal, and training gives both the same updates, so "
        "they never become different. Build each head separately, as the wrapper's list comprehension "
        "does: one new CausalAttention per head.",
        lambda a: a.sharing is not None,
    ),
    Mistake(
        "context_length too short",
        "context_length={context_length} makes the causal mask cover only {context_length} tokens, but the "
        "example sentence has 6, so this wrapper cannot process it. context_length is the longest "
        "sequence the wrapper accepts, not the output width: keep it at 6 (or more). The output width "
        "is set by d_out.",
        lambda a: a.context_length is not None and a.context_length < TWO_DIM_PROBE_TOKENS,
    ),
    Mistake(
        "heads not given the same x",
        "Head {fed_head} was not given the wrapper's input x: it received {fed_what}. Every head must "
        "read the same x; the heads work side by side, not as a pipeline. Pass x to each head, as in "
        + _KEEP_FORWARD + ".",
        lambda a: a.wrongly_fed is not None,
    ),
    Mistake(
        "a head attends to later tokens",
        "Head {leaking_head} lets tokens attend to later tokens: its outputs for early tokens change when "
        "a later token changes, so its causal mask was removed or altered. Each head's role must stay "
        "as it was (attention over the current and earlier tokens only), so " + _CHANGE_ARGUMENTS + ".",
        lambda a: any(a.leaks),
    ),
    Mistake(
        "columns thrown away",
        "Your wrapper makes its output narrower by throwing values away: each head computes {head_width} "
        "values per token, and not all of them reach the output. Every value a head computes is part "
        "of its role. Instead of cutting, make each head compute one value: d_out=1.",
        lambda a: a.head_width > 1 and (a.heads_trim_their_output() or a.output_keeps_some_columns()),
    ),
    Mistake(
        "a head's computation changed",
        "Head {changed_head} no longer computes causal attention as it was built to: {changed_how}. "
        "Each head's role must stay as it was, so " + _CHANGE_ARGUMENTS + ", not the heads.",
        lambda a: a.changed is not None,
    ),
    Mistake(
        "forward raises",
        "Calling your wrapper on a batch of shape {probe_shape} raised {error_text}. Fix that first: the "
        "wrapper's forward should still end with return " + _KEEP_FORWARD + ".",
        lambda a: a.error is not None,
    ),
    Mistake(
        "returns None",
        "Your wrapper's forward returned None: did it forget to return its result? It should end with "
        "return " + _KEEP_FORWARD + ".",
        lambda a: a.output is None,
    ),
    Mistake(
        "returns a list",
        "Your wrapper returned {output_kind} of {output_length} tensors, not one tensor. The heads' "
        "outputs still have to be joined into one context vector per token: "
        "torch.cat(head_outputs, dim=-1).",
        lambda a: isinstance(a.output, (list, tuple)),
    ),
    Mistake(
        "returns something else",
        "Your wrapper returned {output_kind}, not a tensor of context vectors. Its forward should end "
        "with return " + _KEEP_FORWARD + ".",
        lambda a: not isinstance(a.output, torch.Tensor),
    ),
    Mistake(
        "stacked instead of concatenated",
        "You used torch.stack, which puts the heads on a new axis of their own: the output has shape "
        "{output_shape} instead of (batch, num_tokens, num_heads × d_out). torch.cat(head_outputs, dim=-1) "
        "joins the heads along the existing last axis, so that each token gets one vector.",
        lambda a: a.stack_axis is not None,
    ),
    Mistake(
        "concatenated on the wrong axis",
        "You joined the heads' outputs along the {axis_name} (dim={cat_axis}), so the output has shape "
        "{output_shape}: the second head's results became extra {axis_things} instead of longer vectors. "
        "Concatenate along the last axis, dim=-1, so that each token's vector holds both heads' values.",
        lambda a: a.cat_axis is not None,
    ),
    Mistake(
        "heads added instead of concatenated",
        "You {combined} the heads' outputs. That gives the right width, but every coordinate now blends "
        "both heads, and neither head's result can be read off. Concatenate instead "
        "(torch.cat(..., dim=-1)) and make each head one value wide with d_out=1.",
        lambda a: a.combined is not None,
    ),
    Mistake(
        "heads mixed by a projection",
        "Your output is a weighted mix of the heads' concatenated outputs, as an extra layer such as "
        "nn.Linear(4, 2) after torch.cat produces. That is a learned mix of heads, the kind of mixing "
        "out_proj does in this book's chapter 3 (there it keeps the width), and it blends both heads "
        "into every coordinate. The exercise keeps the class as it is and gives each head one "
        "coordinate of its own: keep num_heads=2 and set d_out=1.",
        lambda a: a.output_mixes_heads(),
    ),
    Mistake(
        "d_out left at its old value",
        "Your context vectors are {width}-dimensional. The wrapper's output width is num_heads × d_out "
        "= {num_heads} × {head_width} = {width}, because d_out is the width of each head, not of the "
        "whole output. Keep num_heads=2 and change d_out to 1: 2 × 1 = 2.",
        lambda a: _two_dim_close(a.output, a.concatenated) and a.width != TWO_DIM_WIDTH,
    ),
)


@never_raises
def check_two_dim_output(wrapper):
    """Check chapter 2's exercise: a ``MultiHeadAttentionWrapper`` with two heads and 2-D context vectors.

    ``wrapper`` is the reader's module. The check infers ``d_in`` and ``context_length`` from its
    heads, runs it on a probe batch of its own, and compares the output with what its heads
    compute, head by head. It names the first known mistake it recognises.
    """
    attempt = TwoDimAttempt(wrapper)
    mistake = first_mistake(TWO_DIM_MISTAKES, attempt)
    if mistake is not None:
        return CheckResult(False, _fill(mistake.message, attempt))
    if attempt.is_correct():
        return CheckResult(
            True,
            "Two heads, one value each: the context vectors are 2-dimensional (num_heads × d_out = 2 × 1), "
            "and each head still computes causal attention over the same x, exactly as before.",
        )
    return CheckResult(
        False,
        _fill(
            "Your wrapper's output (shape {output_shape}) is not the two heads' outputs placed side by side, "
            "and it matches none of the mistakes this check knows. Keep forward as " + _KEEP_FORWARD
            + " and " + _CHANGE_ARGUMENTS + ".",
            attempt,
        ),
    )


two_dim_output = Exercise(
    check_two_dim_output,
    hints=(
        "The wrapper's output is num_heads × d_out wide, because every head contributes d_out values "
        "per token. Of those two arguments, which one does the exercise let you change?",
        "num_heads stays 2, so for a width of 2 each head may contribute only one value per token. "
        "Which argument sets the width of each head?",
        "Change d_out from 2 to 1 and keep every other argument as it was.",
    ),
    solution_code=(
        "torch.manual_seed(123)\n"
        "mha = MultiHeadAttentionWrapper(d_in=3, d_out=1, context_length=6, dropout=0.0, num_heads=2)\n"
        "with torch.no_grad():\n"
        "    context_vecs = mha(batch)\n"
        'print("output shape:", tuple(context_vecs.shape))\n'
        'print("first row:", context_vecs[0, 0])\n'
        "check_two_dim_output(mha)"
    ),
)

# ---------------------------------------------------------------------------------------------
# Chapter 3: check_weight_split
# ---------------------------------------------------------------------------------------------
