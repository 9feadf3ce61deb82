"""What a wrapper of heads does with its input: the evidence chapters 1 and 2 check.

:class:`HeadsRun` runs a module that keeps its heads in ``.heads`` (in eval mode, under
``no_grad``, its mode restored) on an input of the checker's own: once as a whole, with hooks
that record what each head receives and in which order the heads run, and each head once on
its own. Each head's correct output is computed independently from that head's own weights
(:func:`.reference.head_output`), so the answer is compared with what *its* heads should give.
"""

import torch

from .core import describe_error, evaluating, kind_of
from .reference import PROJECTIONS, head_output, same


def is_head(module):
    """Whether ``module`` has its own query, key and value projections, as a head has."""
    return isinstance(module, torch.nn.Module) and all(
        isinstance(getattr(module, name, None), torch.nn.Linear) for name in PROJECTIONS
    )


def find_heads(module):
    """``module.heads`` as a list, or ``None`` if it keeps no list of heads."""
    try:
        heads = getattr(module, "heads", None)
        if isinstance(heads, (torch.nn.ModuleList, list, tuple)):
            return list(heads)
    except Exception:
        pass
    return None


def _call(function, *args):
    """``function(*args)``, or the exception it raised."""
    try:
        return function(*args)
    except Exception as error:
        return error


class HeadsRun:
    """Everything a check observes about a module with heads, run on ``x``, gathered once."""

    def __init__(self, module, x):
        self.module, self.x = module, x
        self.heads = find_heads(module) or []
        self.output = self.error = None
        self.received, self.order, self.own_outputs, self.references, self.leaks = (
            [],
            [],
            [],
            [],
            [],
        )
        if self.heads and all(is_head(h) for h in self.heads):
            with evaluating(module):
                self._observe()

    def _observe(self):
        if self.d_in != self.x.shape[-1]:
            return  # the heads cannot read the input at all; the catalogue says why
        self.references = [_call(head_output, head, self.x) for head in self.heads]
        if self.context_length is not None and self.context_length < self.x.shape[1]:
            return  # the heads cannot take the input at all; the catalogue says why
        generator = torch.Generator().manual_seed(99)
        changed = self.x.clone()
        b, _, d_in = self.x.shape
        changed[:, -1] = torch.rand(b, d_in, generator=generator, dtype=self.x.dtype)
        for head in self.heads:
            before, after = _call(head, self.x), _call(head, changed)
            self.own_outputs.append(before)
            self.leaks.append(
                isinstance(before, torch.Tensor)
                and isinstance(after, torch.Tensor)
                and before.shape == after.shape
                and before.dim() == 3
                and not same(before[:, :-1], after[:, :-1])
            )
        self._run_with_hooks()

    def _run_with_hooks(self):
        self.received = [[] for _ in self.heads]
        handles = []

        def recorder(position):
            def record(module, args, kwargs):
                self.order.append(position)
                first = args[0] if args else next(iter(kwargs.values()), None)
                self.received[position].append(first)

            return record

        try:
            for position, head in enumerate(self.heads):
                hook = head.register_forward_pre_hook(recorder(position), with_kwargs=True)
                handles.append(hook)
            self.output = self.module(self.x)
        except Exception as error:
            self.error = error
        finally:
            for handle in handles:
                handle.remove()

    # -- facts the messages quote -------------------------------------------------------------

    @property
    def num_heads(self):
        return len(self.heads)

    @property
    def head_width(self):
        return self.heads[0].W_value.out_features

    @property
    def d_in(self):
        return self.heads[0].W_query.in_features

    @property
    def context_length(self):
        lengths = [
            head.mask.shape[0]
            for head in self.heads
            if isinstance(getattr(head, "mask", None), torch.Tensor) and head.mask.dim() == 2
        ]
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
        return kind_of(self.output)

    @property
    def output_length(self):
        return len(self.output)

    @property
    def concatenated(self):
        """The correct output: the heads' correct outputs side by side."""
        return torch.cat(self.references, dim=-1)  # (b, num_tokens, num_heads * d_out)

    @property
    def not_a_head(self):
        position = next(p for p, head in enumerate(self.heads) if not is_head(head))
        return f"Head {position + 1} is a {type(self.heads[position]).__name__}"

    @property
    def sharing(self):
        """How two heads share one set of weights, in words, or ``None``."""
        for first, second in zip(self.heads, self.heads[1:], strict=False):
            if first is second:
                return "they are the same object, as [head] * num_heads makes"
            pairs = [(getattr(first, n), getattr(second, n)) for n in PROJECTIONS]
            if any(a.weight.data_ptr() == b.weight.data_ptr() for a, b in pairs):
                return "they use the very same weight tensors"
            if all(torch.equal(a.weight, b.weight) for a, b in pairs):
                return "one is a copy of the other"
        return None

    @property
    def wrongly_fed(self):
        """``(head number, what it received)`` for the first head not given x."""
        for position, inputs in enumerate(self.received):
            for received in inputs:
                if not same(received, self.x):
                    return position + 1, self._describe_input(received)
        return None

    def _describe_input(self, received):
        if not isinstance(received, torch.Tensor):
            return kind_of(received)
        for position, output in enumerate(self.own_outputs):
            if same(received, output):
                return f"head {position + 1}'s output (shape {tuple(received.shape)})"
        return f"another tensor, of shape {tuple(received.shape)}"

    @property
    def chained(self):
        """Some head received another head's output."""
        return self.wrongly_fed is not None and "output" in self.wrongly_fed[1]

    @property
    def fed_head(self):
        return self.wrongly_fed[0]

    @property
    def fed_what(self):
        return self.wrongly_fed[1]

    @property
    def calls(self):
        """How many times each head ran, in list order."""
        return [len(inputs) for inputs in self.received]

    @property
    def skipped(self):
        """The numbers of the heads that never ran."""
        return [n for n, count in enumerate(self.calls, start=1) if count == 0]

    @property
    def repeated(self):
        """The number of the first head that ran more than once."""
        return next((n for n, count in enumerate(self.calls, start=1) if count > 1), None)

    @property
    def run_order(self):
        """The heads' numbers in the order they ran, e.g. ``3, 2, 1``."""
        return ", ".join(str(position + 1) for position in self.order)

    @property
    def out_of_order(self):
        return self.order != sorted(self.order)

    @property
    def leaking_head(self):
        return self.leaks.index(True) + 1

    def output_is_3d(self):
        output = self.output
        return (
            isinstance(output, torch.Tensor)
            and output.dim() == 3
            and output.shape[:2] == self.x.shape[:2]
        )

    @property
    def stack_axis(self):
        stacks = ((d, _call(torch.stack, self.references, d)) for d in range(4))
        return next((d for d, stacked in stacks if same(self.output, stacked)), None)

    @property
    def cat_axis(self):
        joined = ((d, torch.cat(self.references, dim=d)) for d in (0, 1))
        return next((d for d, cat in joined if same(self.output, cat)), None)

    @property
    def axis_name(self):
        return ("batch axis", "token axis")[self.cat_axis]

    @property
    def axis_things(self):
        return ("sequences", "tokens")[self.cat_axis]

    @property
    def combined(self):
        stacked = torch.stack(self.references)  # (num_heads, b, num_tokens, d_out)
        if same(self.output, stacked.sum(0)):
            return "added"
        if same(self.output, stacked.mean(0)):
            return "averaged"
        return None

    @property
    def reordered(self):
        """How the output rearranges the heads' columns, in words, or ``None``."""
        if not self.output_is_3d() or self.num_heads < 2 or same(self.output, self.concatenated):
            return None
        if same(self.output, torch.cat(self.references[::-1], dim=-1)):
            return "reversed"
        if same(self.output, torch.stack(self.references, dim=-1).flatten(-2)):
            return "interleaved"
        columns = self.concatenated.unbind(-1)
        found = [
            next((j for j, col in enumerate(columns) if same(out, col)), None)
            for out in self.output.unbind(-1)
        ]
        if None not in found and sorted(found) == list(range(len(columns))):
            return "shuffled"
        return None

    def output_mixes_heads(self):
        """The output is an affine function of the concatenated heads, fitted exactly."""
        if not self.output_is_3d() or same(self.output, self.concatenated):
            return False
        inputs = self.concatenated.flatten(0, 1).double()  # (b * num_tokens, width)
        inputs = torch.cat([inputs, torch.ones(len(inputs), 1, dtype=inputs.dtype)], dim=1)
        targets = self.output.flatten(0, 1).double()  # (b * num_tokens, output width)
        if len(inputs) < 2 * inputs.shape[1]:
            return False  # too few rows for the fit to mean anything
        fit = torch.linalg.lstsq(inputs, targets).solution
        residual = (inputs @ fit - targets).norm()
        return bool(residual <= 1e-5 * (targets.norm() + 1e-12))

    def heads_trim_their_output(self):
        return any(
            isinstance(own, torch.Tensor)
            and own.dim() == 3
            and own.shape[-1] < head.W_value.out_features
            for own, head in zip(self.own_outputs, self.heads, strict=False)
        )

    def output_keeps_some_columns(self):
        """The output is made of some (not all) of the columns the heads compute."""
        if not (self.output_is_3d() and self.width < self.concatenated.shape[-1]):
            return False
        columns = self.concatenated.unbind(-1)
        return all(any(same(out, col) for col in columns) for out in self.output.unbind(-1))

    @property
    def changed(self):
        """``(head number, its own output)`` for the first head not computing causal attention."""
        pairs = enumerate(zip(self.own_outputs, self.references, strict=False), start=1)
        return next(((n, own) for n, (own, ref) in pairs if not same(own, ref)), None)

    @property
    def changed_head(self):
        return self.changed[0]

    @property
    def changed_how(self):
        own = self.changed[1]
        if isinstance(own, Exception):
            return f"run on its own, it raised {describe_error(own)}"
        return (
            "its output differs from the softmax of its own queries and keys, causally masked "
            "and scaled by √d_out, applied to its own values (perhaps its scaling or its "
            "softmax was changed)"
        )

    def is_joined_correctly(self):
        """Every head ran once, in order, on x, and the output is their outputs side by side."""
        try:
            return (
                self.error is None
                and self.wrongly_fed is None
                and self.calls == [1] * self.num_heads
                and not self.out_of_order
                and same(self.output, self.concatenated)
            )
        except Exception:
            return False
