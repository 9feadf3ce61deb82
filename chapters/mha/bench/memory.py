"""What a forward pass holds in memory, counted tensor by tensor: deterministic, unlike faults.

The allocator decides whether memory faults (its history, its thresholds, huge pages); what a
forward *asks* for does not depend on any of that. ``held_in_memory`` records every tensor an
operator returns during one forward, and watches when its memory is freed, so it can say how
many score matrices (floating tensors of shape (..., num_tokens, num_tokens), batched) the
forward made, how many of them were alive at once, and the peak of all the memory the forward's own
tensors held. A native operator that does a whole
layer inside (``nn.MultiheadAttention``'s fast path) is one call: what it allocates inside is not
seen, so its count says nothing about it.
"""

import weakref
from dataclasses import dataclass, field

import torch
from torch.utils._pytree import tree_flatten

from ..counting import QuietDispatchMode


@dataclass
class HeldInMemory:
    """One forward's tensors: ``made`` lists (operator, shape, bytes) of each score matrix it
    made, (..., num_tokens, num_tokens); ``most_alive`` is how many of those existed at once;
    ``peak_bytes`` the most bytes all the forward's new tensors held at once."""

    num_tokens: int
    made: list = field(default_factory=list)
    most_alive: int = 0
    peak_bytes: int = 0


class _Watcher(QuietDispatchMode):
    """Adds each new storage an operator returns; a finalizer subtracts it when it is freed."""

    def __init__(self, found, existing):
        super().__init__()
        self.found = found
        self.existing = existing  # data_ptrs of the input's, weights' and buffers' memory
        self.live = {}  # data_ptr -> (bytes, large)
        self.bytes_now = 0
        self.large_now = 0

    def _freed(self, key):
        nbytes, large = self.live.pop(key)
        self.bytes_now -= nbytes
        self.large_now -= large

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for tensor in tree_flatten(out)[0]:
            if isinstance(tensor, torch.Tensor):
                self._see(func, tensor)
        return out

    def _see(self, func, tensor):
        storage = tensor.untyped_storage()
        key, nbytes = storage.data_ptr(), storage.nbytes()
        if nbytes == 0 or key in self.live or key in self.existing:  # a view: counted already
            return
        square = tensor.shape[-2:] == (self.found.num_tokens,) * 2
        large = square and tensor.dim() >= 3 and tensor.is_floating_point()
        self.live[key] = (nbytes, large)
        self.bytes_now += nbytes
        self.large_now += large
        if large:
            name = func.overloadpacket.__name__
            self.found.made.append((name, tuple(tensor.shape), nbytes))
        self.found.most_alive = max(self.found.most_alive, self.large_now)
        self.found.peak_bytes = max(self.found.peak_bytes, self.bytes_now)
        weakref.finalize(storage, self._freed, key)


def held_in_memory(module, x):
    """Run ``module(x)`` once without gradients and count what its operators allocate.

    ``x`` is (b, num_tokens, d_in). The output is freed before the counts are returned, so it
    counts as alive only during the forward.
    """
    if x.dim() != 3:
        raise ValueError(
            f"x must be (batch, num_tokens, d_in), got shape {tuple(x.shape)}: add a batch axis"
        )
    found = HeldInMemory(x.shape[1])
    with torch.no_grad():
        held = [x, *module.parameters(), *module.buffers()]
        watcher = _Watcher(found, {t.untyped_storage().data_ptr() for t in held})
        with watcher:
            output = module(x)
        del output
    return found
