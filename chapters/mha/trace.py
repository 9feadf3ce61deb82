"""Watch a wrapper's heads run: which head is called when, and with what input."""

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class HeadCall:
    """One call of one head during a forward pass."""

    step: int  # 1 for the first head called, 2 for the second, ...
    head: int  # the head's position in ``wrapper.heads``, counted from 1
    same_object: bool  # the head received the very tensor passed to the wrapper
    same_values: bool  # ... or at least a tensor with equal values
    output_shape: tuple


def trace_heads(wrapper, x):
    """Run ``wrapper(x)`` once with hooks on every head; return the calls in the order they ran."""
    calls, inputs = [], {}
    handles = []
    for position, head in enumerate(wrapper.heads, start=1):

        def before(module, args, position=position):
            inputs[position] = args[0]

        def after(module, args, output, position=position):
            received = inputs.pop(position)
            calls.append(
                HeadCall(
                    step=len(calls) + 1,
                    head=position,
                    same_object=received is x,
                    same_values=bool(torch.equal(received, x)),
                    output_shape=tuple(output.shape),
                )
            )

        handles.append(head.register_forward_pre_hook(before))
        handles.append(head.register_forward_hook(after))
    try:
        with torch.no_grad():
            wrapper(x)
    finally:
        for handle in handles:
            handle.remove()
    return calls
