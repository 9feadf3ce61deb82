"""Self-checks for the book's exercises.

The convention, shared by every exercise:

* a check is a function that takes the reader's answer and returns a :class:`CheckResult`
  (``.passed``, ``.feedback``); in Jupyter it renders as a short coloured box;
* a check never raises, whatever it is given, and names the mistake it found;
* mistakes are recognised from a *catalogue*: each :class:`Mistake` knows how to spot itself
  and what to tell the reader, so a new mistake is one new entry;
* modules are run in eval mode under ``no_grad``, and their mode is restored afterwards;
* each exercise is also an :class:`Exercise` with ``check()``, ``hint()`` and ``solution()``,
  in the spirit of Kaggle's learntools.
"""

import contextlib
import html
import textwrap
from dataclasses import dataclass
from typing import Callable

import torch


@dataclass(frozen=True)
class CheckResult:
    """The outcome of a check: did it pass, and what should the reader hear?"""

    passed: bool
    feedback: str

    def __str__(self):
        mark = "✓ Correct." if self.passed else "✗ Not yet."
        return f"{mark} {self.feedback}"

    __repr__ = __str__

    def _repr_html_(self):
        colour, background, mark = (
            ("#1b5e20", "#e8f5e9", "✓ Correct.") if self.passed else ("#8a1c1c", "#fdecea", "✗ Not yet.")
        )
        body = html.escape(self.feedback).replace("\n", "<br>")
        return (
            f'<div class="mha-check" style="border-left:4px solid {colour};background:{background};'
            f'color:{colour};padding:0.5em 0.8em;margin:0.3em 0">'
            f"<strong>{mark}</strong> {body}</div>"
        )


@dataclass(frozen=True)
class Mistake:
    """One known mistake: how to recognise it, and what to tell the reader about it."""

    name: str
    message: str
    detect: Callable[..., bool]

    def found_in(self, *evidence):
        """Whether ``detect`` recognises the mistake; a detector that fails recognises nothing."""
        try:
            return bool(self.detect(*evidence))
        except Exception:
            return False


def first_mistake(catalogue, *evidence):
    """The first mistake in ``catalogue`` recognised in ``evidence``, or ``None``."""
    return next((mistake for mistake in catalogue if mistake.found_in(*evidence)), None)


def describe_error(error):
    """``TypeError: message``: what the reader needs from an exception, without a traceback."""
    message = str(error).strip()
    return f"{type(error).__name__}: {message}" if message else type(error).__name__


@contextlib.contextmanager
def evaluating(module):
    """Run ``module`` in eval mode under ``no_grad``, then restore every submodule's mode."""
    modes = [(m, m.training) for m in module.modules()]
    module.eval()
    try:
        with torch.no_grad():
            yield module
    finally:
        for m, training in modes:
            m.training = training


def never_raises(check):
    """Wrap a check so that an unexpected failure inside it becomes feedback, not a traceback."""

    def guarded(*args, **kwargs):
        try:
            return check(*args, **kwargs)
        except Exception as error:  # a checker must never raise at the reader
            return CheckResult(False, f"The check itself could not run on this answer ({describe_error(error)}).")

    guarded.__name__ = check.__name__
    guarded.__doc__ = check.__doc__
    guarded.__wrapped__ = check
    return guarded


@dataclass(frozen=True)
class Note:
    """A hint or a solution, shown as plain text or as a small HTML box."""

    title: str
    text: str
    code: bool = False

    def __str__(self):
        return f"{self.title}:\n{textwrap.indent(self.text, '    ') if self.code else self.text}"

    __repr__ = __str__

    def _repr_html_(self):
        body = html.escape(self.text)
        body = f"<pre>{body}</pre>" if self.code else body.replace("\n", "<br>")
        return (
            '<div class="mha-note" style="border-left:4px solid #0072B2;background:#eef5fb;color:#0b3a5c;'
            f'padding:0.5em 0.8em;margin:0.3em 0"><strong>{html.escape(self.title)}.</strong> {body}</div>'
        )


@dataclass(frozen=True)
class Exercise:
    """One exercise: ``check(answer)``, ``hint(n)`` and ``solution()`` in one object."""

    checker: Callable[..., CheckResult]
    hints: tuple
    solution_code: str

    def check(self, answer):
        return self.checker(answer)

    def hint(self, n=1):
        if not 1 <= n <= len(self.hints):
            return Note("Hint", f"There are {len(self.hints)} hints: ask for hint(1) to hint({len(self.hints)}).")
        return Note(f"Hint {n} of {len(self.hints)}", self.hints[n - 1])

    def solution(self):
        return Note("Solution", self.solution_code, code=True)


# ---------------------------------------------------------------------------------------------
# Chapter 2: check_two_dim_output
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

PROJECTIONS = ("W_query", "W_key", "W_value")


@dataclass(frozen=True)
class SplitConfig:
    """One way the check builds the reader's class and calls it: sizes, head count, input length."""

    d_in: int
    d_out: int
    context_length: int
    num_heads: int
    num_tokens: int
    batch: int = 2
    seed: int = 0

    @property
    def head_dim(self):
        return self.d_out // self.num_heads

    @property
    def kwargs(self):
        return dict(d_in=self.d_in, d_out=self.d_out, context_length=self.context_length,
                    dropout=0.0, num_heads=self.num_heads)

    @property
    def input_shape(self):
        return (self.batch, self.num_tokens, self.d_in)

    def call(self, cls):
        """How the check builds ``cls``, written as the reader would type it."""
        arguments = ", ".join(f"{name}={value!r}" for name, value in self.kwargs.items())
        return f"{getattr(cls, '__name__', 'cls')}({arguments})"

    def input(self):
        """A seeded random input, drawn without touching the reader's global random state."""
        generator = torch.Generator().manual_seed(1000 + self.seed)
        return torch.randn(*self.input_shape, generator=generator)  # (batch, num_tokens, d_in)

    def full_length(self):
        """The same configuration with an input exactly ``context_length`` tokens long."""
        return SplitConfig(self.d_in, self.d_out, self.context_length, self.num_heads,
                           self.context_length, self.batch, self.seed)

    def with_heads(self, num_heads):
        """The same configuration with another head count and the same ``head_dim``."""
        return SplitConfig(self.d_in, num_heads * self.head_dim, self.context_length, num_heads,
                           self.num_tokens, self.batch, self.seed)


#: The configurations the check runs, in order. The first has several heads and a full-length
#: input, so most mistakes show there; the others add a shorter input than the mask, one head,
#: d_in larger than d_out and head_dim 1. Every one has d_in != d_out.
WEIGHT_SPLIT_CONFIGS = (
    SplitConfig(d_in=5, d_out=12, context_length=6, num_heads=3, num_tokens=6, seed=1),
    SplitConfig(d_in=6, d_out=8, context_length=8, num_heads=2, num_tokens=5, seed=2),
    SplitConfig(d_in=4, d_out=6, context_length=5, num_heads=1, num_tokens=5, seed=3),
    SplitConfig(d_in=3, d_out=8, context_length=7, num_heads=4, num_tokens=3, seed=4),
    SplitConfig(d_in=10, d_out=6, context_length=4, num_heads=6, num_tokens=4, seed=5),
)


@dataclass(frozen=True)
class SplitRecipe:
    """How a weight-split forward pass computes its output from a module's own layers.

    The defaults are the correct pass; each mistake in the catalogue changes one ingredient.
    """

    split_transposes: bool = True  # view to (b, num_tokens, num_heads, head_dim), then transpose(1, 2)
    merge_transposes: bool = True  # transpose(1, 2) back before merging the heads
    scale_by: str = "head_dim"  # the scores are divided by √head_dim; or "d_out", or "nothing"
    causal_mask: str = "-inf before softmax"  # or "none", "0 before softmax", "0 after softmax", "-inf after softmax"
    softmax_dim: int = -1  # each query's weights sum to 1 over the keys
    out_proj: bool = True  # apply the module's out_proj, when it has one


CORRECT_SPLIT = SplitRecipe()


def split_attention(module, x, num_heads, recipe=CORRECT_SPLIT):
    """The output of a weight-split pass over ``module``'s W_query/W_key/W_value (and out_proj), per ``recipe``."""
    b, num_tokens, _ = x.shape
    queries, keys, values = (
        _split(getattr(module, name)(x), num_heads, recipe.split_transposes) for name in PROJECTIONS
    )  # each (b, num_heads, num_tokens, head_dim)
    head_dim = queries.shape[-1]
    scale = {"head_dim": head_dim, "d_out": num_heads * head_dim, "nothing": 1}[recipe.scale_by] ** 0.5
    future = torch.ones(num_tokens, num_tokens, dtype=torch.bool, device=x.device).triu(1)

    attn_scores = queries @ keys.transpose(2, 3)  # (b, num_heads, num_tokens, num_tokens)
    if recipe.causal_mask.endswith("before softmax"):
        attn_scores = attn_scores.masked_fill(future, 0.0 if recipe.causal_mask.startswith("0") else -torch.inf)
    attn_weights = torch.softmax(attn_scores / scale, dim=recipe.softmax_dim)
    if recipe.causal_mask.endswith("after softmax"):
        attn_weights = attn_weights.masked_fill(future, 0.0 if recipe.causal_mask.startswith("0") else -torch.inf)

    context = _merge(attn_weights @ values, recipe.merge_transposes)  # (b, num_tokens, d_out)
    out_proj = getattr(module, "out_proj", None)
    return out_proj(context) if recipe.out_proj and out_proj is not None else context


def _split(t, num_heads, transposes):
    """``(b, num_tokens, d_out)`` → ``(b, num_heads, num_tokens, head_dim)``, right or the mistaken way."""
    b, num_tokens, d_out = t.shape
    if transposes:
        return t.reshape(b, num_tokens, num_heads, d_out // num_heads).transpose(1, 2)
    return t.reshape(b, num_heads, num_tokens, d_out // num_heads)  # mixes tokens and heads


def _merge(context, transposes):
    """``(b, num_heads, num_tokens, head_dim)`` → ``(b, num_tokens, d_out)``, right or the mistaken way."""
    b, num_heads, num_tokens, head_dim = context.shape
    if transposes:
        context = context.transpose(1, 2)  # (b, num_tokens, num_heads, head_dim)
    return context.reshape(b, num_tokens, num_heads * head_dim)


def _same(output, expected):
    """Equal up to float32 rounding, with nan where the expected output has nan."""
    return (
        isinstance(output, torch.Tensor)
        and output.shape == expected.shape
        and output.is_floating_point()
        and torch.allclose(output.double(), expected.double(), rtol=1e-4, atol=1e-5, equal_nan=True)
    )


class SplitTrial:
    """One run of the reader's class on one configuration: what it built, and what it returned or raised."""

    def __init__(self, cls, config):
        self.cls, self.config = cls, config
        self.module = self.output = self.error = None
        self.stage = None  # "constructor" or "forward", when that raised
        self.x = config.input()  # (batch, num_tokens, d_in)
        try:
            with torch.random.fork_rng(devices=[]):  # seeded, and the reader's random state is left alone
                torch.manual_seed(config.seed)
                self.module = cls(**config.kwargs)
            with evaluating(self.module):
                self.output = self.module(self.x)
        except Exception as error:
            self.stage = "constructor" if self.module is None else "forward"
            self.error = error
        self._head_count = ...  # computed when first asked for

    def expected(self, recipe=CORRECT_SPLIT, num_heads=None):
        """What ``recipe`` computes from this instance's own weights."""
        with evaluating(self.module):
            return split_attention(self.module, self.x, num_heads or self.config.num_heads, recipe)

    def matches(self, recipe=CORRECT_SPLIT, num_heads=None):
        """Whether the reader's output is what ``recipe`` computes from this instance's weights."""
        if self.error is not None:
            return False
        try:
            return _same(self.output, self.expected(recipe, num_heads))
        except Exception:
            return False

    @property
    def passed(self):
        return self.matches() and tuple(self.output.shape) == self.expected_shape

    @property
    def unusable_projections(self):
        """The projections the check cannot call on the input, e.g. missing or misnamed."""
        unusable = []
        for name in PROJECTIONS:
            try:
                with evaluating(self.module):
                    getattr(self.module, name)(self.x)
            except Exception:
                unusable.append(name)
        return unusable

    @property
    def projection_width(self):
        with evaluating(self.module):
            return self.module.W_query(self.x).shape[-1]

    @property
    def hard_coded_head_count(self):
        """The head count the class really uses, when it is not the one it was built with."""
        if self._head_count is ...:
            self._head_count = self._find_hard_coded_head_count()
        return self._head_count

    def _find_hard_coded_head_count(self):
        config = self.config
        others = [k for k in range(1, config.d_out + 1) if config.d_out % k == 0 and k != config.num_heads]
        for k in others:  # the output is right for k heads, with this instance's weights
            if self.matches(num_heads=k):
                return k
        for k in range(2, 9):  # or the class only works when built with k heads
            if k != config.num_heads and SplitTrial(self.cls, config.with_heads(k)).passed:
                return k
        return None

    @property
    def works_on_full_length_input(self):
        return self.config.num_tokens < self.config.context_length and (
            SplitTrial(self.cls, self.config.full_length()).passed
        )

    @property
    def expected_shape(self):
        return (self.config.batch, self.config.num_tokens, self.config.d_out)

    @property
    def output_shape(self):
        return tuple(self.output.shape)

    @property
    def shows_heads_unmerged(self):
        c = self.config
        return self.output_shape in {(c.batch, c.num_heads, c.num_tokens, c.head_dim),
                                     (c.batch, c.num_tokens, c.num_heads, c.head_dim)}

    @property
    def largest_difference(self):
        return float((self.output.double() - self.expected().double()).abs().max())

    @property
    def error_text(self):
        return describe_error(self.error).rstrip(".")  # the message goes on with its own full stop

    @property
    def call(self):
        return self.config.call(self.cls)


def _output_follows(*recipes):
    """A detector: the reader's output is what one of ``recipes`` computes from the instance's weights."""
    return lambda trial: any(trial.matches(recipe) for recipe in recipes)


NOT_A_CLASS_MISTAKES = (
    Mistake(
        "nothing passed",
        "check_weight_split got None. Run the cell that defines your class, then pass the class "
        "itself: check_weight_split(MyWeightSplit).",
        lambda answer: answer is None,
    ),
    Mistake(
        "an instance instead of the class",
        "You passed an instance of {name}, not the class. Pass the class itself, "
        "check_weight_split({name}): the check builds its own instances with several head counts.",
        lambda answer: isinstance(answer, torch.nn.Module),
    ),
    Mistake(
        "not a class",
        "check_weight_split expects a class, but got {kind}. Pass the class you defined with "
        "class ...(nn.Module): by its name, without calling it.",
        lambda answer: not isinstance(answer, type),
    ),
    Mistake(
        "not an nn.Module",
        "{name} is a class, but not an nn.Module. Start its definition with class {name}(nn.Module): "
        "(or subclass MultiHeadAttention), so that it holds layers and can be called on a tensor.",
        lambda answer: not issubclass(answer, torch.nn.Module),
    ),
)

WEIGHT_SPLIT_MISTAKES = (
    Mistake(
        "constructor raises",
        "Building your class as {t.call} raised {t.error_text}. Its constructor must accept d_in, "
        "d_out, context_length, dropout and num_heads as keyword arguments and call "
        "super().__init__() first, as MultiHeadAttention's does.",
        lambda t: t.stage == "constructor",
    ),
    Mistake(
        "projections missing",
        "The check could not use your instance's {names}. It computes the expected output from the "
        "instance's own W_query, W_key and W_value, so keep those names: layers that map "
        "(b, num_tokens, d_in) to (b, num_tokens, d_out), such as nn.Linear(d_in, d_out).",
        lambda t: t.unusable_projections,
    ),
    Mistake(
        "d_out taken per head",
        "Your W_query maps d_in={t.config.d_in} to width {t.projection_width}, but here d_out="
        "{t.config.d_out} is the total width of all heads together: each projection is "
        "nn.Linear(d_in, d_out), and each head takes a block of head_dim = d_out // num_heads = "
        "{t.config.head_dim} columns. (In the wrapper, d_out was the width of each head.)",
        lambda t: t.projection_width != t.config.d_out,
    ),
    Mistake(
        "mask not sliced",
        "Your forward works on an input of context_length={t.config.context_length} tokens, but on "
        "{t.config.num_tokens} tokens it raised {t.error_text}. The mask buffer is context_length × "
        "context_length: slice it to the input's length, self.mask.bool()[:num_tokens, :num_tokens], "
        "before masked_fill.",
        lambda t: t.stage == "forward" and t.works_on_full_length_input,
    ),
    Mistake(
        "head count hard-coded",
        "Built with num_heads={t.config.num_heads}, your class computes as if it had "
        "{t.hard_coded_head_count} heads: the head count seems to be written into the code. Take it "
        "from the constructor's argument, and use self.num_heads and self.head_dim everywhere.",
        lambda t: t.hard_coded_head_count is not None,
    ),
    Mistake(
        "forward raises",
        "Calling your forward on an input of shape {t.config.input_shape} raised {t.error_text}.",
        lambda t: t.stage == "forward",
    ),
    Mistake(
        "not a tensor",
        "Your forward returned {kind}, not a tensor. Return the context vectors: a tensor of shape "
        "(b, num_tokens, d_out), here {t.expected_shape}.",
        lambda t: not isinstance(t.output, torch.Tensor),
    ),
    Mistake(
        "heads not merged",
        "Your forward returned shape {t.output_shape}: the heads are still separate. Transpose the "
        "context back to (b, num_tokens, num_heads, head_dim) and merge the last two axes with "
        ".contiguous().view(b, num_tokens, d_out), which gives {t.expected_shape}.",
        lambda t: t.shows_heads_unmerged,
    ),
    Mistake(
        "wrong shape",
        "Your forward returned shape {t.output_shape}, but it should be (b, num_tokens, d_out), "
        "here {t.expected_shape}.",
        lambda t: t.output_shape != t.expected_shape,
    ),
    Mistake(
        "view without transpose",
        "Your heads are split with one view straight to (b, num_heads, num_tokens, head_dim). A view "
        "only regroups numbers in memory order, so each 'head' gets pieces of several tokens: tokens "
        "and heads are mixed. View to (b, num_tokens, num_heads, head_dim) first, then .transpose(1, 2).",
        _output_follows(SplitRecipe(split_transposes=False),
                        SplitRecipe(split_transposes=False, merge_transposes=False)),
    ),
    Mistake(
        "merge without transpose",
        "Your heads are merged without transposing back. The context is (b, num_heads, num_tokens, "
        "head_dim); viewing it straight to (b, num_tokens, d_out) puts one head's rows where other "
        "tokens belong. Call .transpose(1, 2) first, then .contiguous().view(b, num_tokens, d_out).",
        _output_follows(SplitRecipe(merge_transposes=False)),
    ),
    Mistake(
        "scaled by √d_out",
        "The scores are scaled by √d_out = √{t.config.d_out}, but each head's dot products have only "
        "head_dim = {t.config.head_dim} terms. Divide by √head_dim: self.head_dim ** 0.5, or "
        "keys.shape[-1] ** 0.5 after the split.",
        _output_follows(SplitRecipe(scale_by="d_out")),
    ),
    Mistake(
        "not scaled",
        "The scores are not scaled. Divide them by √head_dim (self.head_dim ** 0.5) before the "
        "softmax, so that large dot products do not make the softmax nearly one-hot.",
        _output_follows(SplitRecipe(scale_by="nothing")),
    ),
    Mistake(
        "no causal mask",
        "There is no causal mask: every token also attends to the tokens after it. Fill the future "
        "positions of the scores with -inf before the softmax: "
        "attn_scores.masked_fill(self.mask.bool()[:num_tokens, :num_tokens], -torch.inf).",
        _output_follows(SplitRecipe(causal_mask="none")),
    ),
    Mistake(
        "mask filled with 0",
        "The future positions are filled with 0 instead of -inf. A score of 0 still gets weight "
        "after the softmax (e⁰ = 1); only -inf gives a future token exactly zero weight.",
        _output_follows(SplitRecipe(causal_mask="0 before softmax")),
    ),
    Mistake(
        "mask after softmax",
        "The causal mask is applied after the softmax. Zeroing future weights afterwards leaves rows "
        "that no longer sum to 1, and filling them with -inf gives inf and nan. Mask the scores with "
        "-inf before the softmax, so each row of weights sums to 1 over the visible tokens.",
        _output_follows(SplitRecipe(causal_mask="0 after softmax"),
                        SplitRecipe(causal_mask="-inf after softmax")),
    ),
    Mistake(
        "softmax over the wrong axis",
        "The softmax runs over the wrong axis. Each query's weights over the keys must sum to 1, so "
        "normalise over the last axis of the scores, (b, num_heads, num_tokens, num_tokens): "
        "torch.softmax(..., dim=-1).",
        _output_follows(*(SplitRecipe(softmax_dim=dim) for dim in (-2, 1, 0))),
    ),
    Mistake(
        "out_proj not applied",
        "Your class defines out_proj, but the forward never applies it. After merging the heads, "
        "return self.out_proj(context): in MultiHeadAttention the output projection is part of the "
        "forward pass.",
        _output_follows(SplitRecipe(out_proj=False)),
    ),
)


@never_raises
def check_weight_split(cls):
    """Check a weight-split attention class: build it over several configurations and compare its
    output with a reference computed from each instance's own W_query/W_key/W_value (and out_proj)."""
    problem = first_mistake(NOT_A_CLASS_MISTAKES, cls)
    if problem:
        name = cls.__name__ if isinstance(cls, type) else type(cls).__name__
        return CheckResult(False, problem.message.format(name=name, kind=_kind(cls)))
    for config in WEIGHT_SPLIT_CONFIGS:
        trial = SplitTrial(cls, config)
        if trial.passed:
            continue
        mistake = first_mistake(WEIGHT_SPLIT_MISTAKES, trial)
        if mistake is None:
            return CheckResult(False, _unexplained(trial))
        names = _listed(trial.unusable_projections) if mistake.name == "projections missing" else ""
        message = mistake.message.format(t=trial, kind=_kind(trial.output), names=names)
        seen = "" if trial.stage == "constructor" else f"\n(Seen with {trial.call}.)"
        return CheckResult(False, message + seen)
    heads = sorted({c.num_heads for c in WEIGHT_SPLIT_CONFIGS})
    return CheckResult(
        True,
        f"Your forward pass matches the reference, computed from each instance's own weights, in all "
        f"{len(WEIGHT_SPLIT_CONFIGS)} configurations: {', '.join(map(str, heads[:-1]))} and {heads[-1]} "
        "heads, d_in ≠ d_out, and inputs shorter than context_length.",
    )


def _kind(value):
    """``a list``, ``the function f``, ``None``: what a value is, in words."""
    if value is None:
        return "None"
    if callable(value) and hasattr(value, "__name__") and not isinstance(value, type):
        return f"the function {value.__name__}"
    return f"a value of type {type(value).__name__}"


def _listed(names):
    """``a``, ``a and b``, ``a, b and c``."""
    return " and ".join(filter(None, (", ".join(names[:-1]), names[-1])))


def _unexplained(trial):
    return (
        f"Your output has the right shape, {trial.expected_shape}, but not the right values: the "
        f"largest difference from the reference is {trial.largest_difference:.3g}. None of the usual "
        "mistakes explains it (perhaps two of them together). Check each step once more: split with "
        "view and transpose(1, 2); scores queries @ keys.transpose(2, 3); mask the future with -inf; "
        "softmax over the last axis after dividing by √head_dim; context, transpose back, merge; "
        f"out_proj.\n(Seen with {trial.call}.)"
    )


weight_split = Exercise(
    checker=check_weight_split,
    hints=(
        "Project once, then split. self.W_query(x) has shape (b, num_tokens, d_out): view it as "
        "(b, num_tokens, self.num_heads, self.head_dim), then .transpose(1, 2) so that the heads "
        "come before the tokens. Do the same for the keys and the values.",
        "The scores are queries @ keys.transpose(2, 3), shape (b, num_heads, num_tokens, num_tokens). "
        "Fill self.mask.bool()[:num_tokens, :num_tokens] with -torch.inf, divide by "
        "self.head_dim ** 0.5, and take the softmax over the last axis.",
        "The context is attn_weights @ values, (b, num_heads, num_tokens, head_dim). Transpose it "
        "back with .transpose(1, 2), merge with .contiguous().view(b, num_tokens, self.d_out), and "
        "return self.out_proj(context).",
    ),
    solution_code=textwrap.dedent(
        """\
        class MyWeightSplit(MultiHeadAttention):
            def forward(self, x):
                b, num_tokens, _ = x.shape
                queries = self.W_query(x)  # (b, num_tokens, d_out)
                keys = self.W_key(x)  # (b, num_tokens, d_out)
                values = self.W_value(x)  # (b, num_tokens, d_out)

                # Split the last axis into heads, then put the heads before the tokens.
                queries = queries.view(b, num_tokens, self.num_heads, self.head_dim).transpose(1, 2)
                keys = keys.view(b, num_tokens, self.num_heads, self.head_dim).transpose(1, 2)
                values = values.view(b, num_tokens, self.num_heads, self.head_dim).transpose(1, 2)
                # each is now (b, num_heads, num_tokens, head_dim)

                attn_scores = queries @ keys.transpose(2, 3)  # (b, num_heads, num_tokens, num_tokens)
                future = self.mask.bool()[:num_tokens, :num_tokens]  # (num_tokens, num_tokens)
                attn_scores = attn_scores.masked_fill(future, -torch.inf)
                attn_weights = torch.softmax(attn_scores / self.head_dim ** 0.5, dim=-1)
                attn_weights = self.dropout(attn_weights)

                context = (attn_weights @ values).transpose(1, 2)  # (b, num_tokens, num_heads, head_dim)
                context = context.contiguous().view(b, num_tokens, self.d_out)  # (b, num_tokens, d_out)
                return self.out_proj(context)  # (b, num_tokens, d_out)


        check_weight_split(MyWeightSplit)
        """
    ),
)
