"""The timer the benchmark measures with: PyTorch's ``Timer``, with a finer first block.

``BlockTimer.blocked_autorange`` is ``torch.utils.benchmark.Timer``'s: it warms up, picks how
many runs to time as a block, and times blocks until ``min_run_time`` has passed. Only the
block size grows in steps of 2 instead of 10 (``BlockTimer._estimate_block_size``). ``measure``
adds the blocks a slow statement is missing, with a cap on the time they may take.
"""

import statistics

from torch.utils.benchmark import Measurement, Timer
from torch.utils.benchmark.utils import common

from .usage import now, usage_since

#: Runs per block grow by this factor until a block is long enough (PyTorch's own: 10).
BLOCK_GROWTH = 2


class BlockTimer(Timer):
    """``Timer`` whose block size grows by ``BLOCK_GROWTH`` instead of 10, by PyTorch's rule.

    The rule (torch 2.13's ``Timer._estimate_block_size``): grow the runs per block until the
    timer's own overhead is at most 1e-4 of a block, or a block outlasts ``min_run_time``. For
    a call of 0.5 ms, steps of 10 try 1, 10 and 100 runs: blocks of 50 ms where 8 ms would do
    (about a microsecond of overhead), and every timed block is as long: up to ten times the
    length the rule asks for. Steps of 2 stop within twice it. The estimate's runs also warm the
    statement up, as in ``Timer``.
    """

    def _estimate_block_size(self, min_run_time):
        with common.set_torch_threads(self._task_spec.num_threads):
            overhead = statistics.median(self._timeit(0) for _ in range(5))
            number = 1
            while True:
                taken = self._timeit(number)
                negligible = overhead / taken <= 1e-4 and taken >= min_run_time / 1000
                if negligible or taken > min_run_time or number * BLOCK_GROWTH >= 2**31:
                    return number  # (the last: the C++ interface takes a 32-bit int)
                number *= BLOCK_GROWTH


def measure(timer, *, min_run_time, min_blocks, max_run_time, retry=True):
    """``timer.blocked_autorange``, with one capped retry; returns ``(measurement, capped)``.

    ``blocked_autorange`` stops as soon as ``min_run_time`` has passed, so a statement slower
    than that is timed once, and the median of one sample is no median. When a call timed fewer
    than ``min_blocks`` blocks, the missing blocks are timed one at a time, each as many runs as
    the blocks already timed (``Timer._timeit``, which neither warms up nor estimates the block
    size again: ``blocked_autorange`` would first spend about a block on a new estimate), and
    never for more than ``max_run_time`` seconds (as long as the slowest block seen, each): under
    load that bounds the time a measurement takes. The CPU time and page faults of those blocks'
    calls come back in the measurement's ``metadata["usage"]`` (``usage.Usage``, per call), so a
    slow statement's resource use needs no calls of its own (``run_sweep``). ``capped`` says
    that the cap cut the retry short, or that ``retry`` was False and there were too few blocks.
    """
    measurement = timer.blocked_autorange(min_run_time=min_run_time)
    blocks = len(measurement.raw_times)
    if blocks >= min_blocks:
        return measurement, False
    if not retry:
        return measurement, True
    number = measurement.number_per_run
    slowest = max(measurement.raw_times)  # seconds per block of `number` runs
    needed = (min_blocks - blocks) * slowest
    allowed = min_blocks - blocks if needed <= max_run_time else int(max_run_time // slowest)
    raw_times = list(measurement.raw_times)
    start = now()
    for _ in range(max(allowed, 1)):
        # Timer._timeit, not Timer.timeit: that one first warms up with more calls.
        raw_times.append(timer._timeit(number))
    usage = usage_since(start, max(allowed, 1) * number)
    metadata = {**(measurement.metadata or {}), "usage": usage}
    more = Measurement(number, raw_times, measurement.task_spec, metadata)
    return more, len(raw_times) < min_blocks
