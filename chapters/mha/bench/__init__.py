"""The benchmark of chapter 5 and of ``python -m mha.bench``: time, judge, report.

Imports run one way, from the bottom of this list to the top:

- ``report``: the results as text, for the chapter, the terminal and BENCHMARKS.md;
- ``faults``: the allocator experiment (do page faults cost a module its speed?);
- ``comparison``: noise-aware verdicts between timings, and the book's performance targets;
- ``timing``: the modules, the sweeps, the rounds of measurements and their ``Row``s;
- ``timer``: PyTorch's ``Timer`` with a finer first block, and ``measure`` (missing blocks);
- ``usage``: CPU time and page faults per call, from ``resource.getrusage``;
- ``memory``: the tensors a forward makes and how many are alive at once (deterministic).

Chapter 5 times ``timing.TIMED``; the command line times ``timing.BENCHED``, which adds chapter
7's ``tiled``. Adding an implementation: add its name to ``BENCHED`` and build it in
``timing.timed_modules``, give it a label and a column heading in ``timing.LABELS`` and
``timing.COLUMNS``, and a colour, marker and line style in ``plots_bench.IMPLEMENTATION_STYLES``
and ``IMPLEMENTATION_LINESTYLES``.

``__main__`` is the command line (``python -m mha.bench --help``); the figures are in
``mha.plots_bench``. This file only gathers the names chapters and tests use, so that
``from mha.bench import ...`` reaches all of them.
"""

from .comparison import (
    SPREAD_WORDS,
    TARGETS,
    Target,
    causal_block_prediction,
    check_targets,
    compare,
    overhead_crossover,
    part_of_whole,
    ratios,
    report_targets,
    score_steps,
    select,
    target_verdict,
    time_causal_attention,
    verdicts,
)
from .faults import (
    KEEP_FREED_MEMORY,
    SETTINGS,
    Experiment,
    Probe,
    allocator_experiment,
    allocator_table,
    allocator_verdict,
)
from .memory import HeldInMemory, held_in_memory
from .report import (
    markdown,
    method_note,
    phone_tables,
    speedup_lines,
    summary,
    timing_tables,
    usage_table,
)
from .timer import BlockTimer, measure
from .timing import (
    BENCHED,
    COLUMNS,
    CSV_COLUMNS,
    FULL,
    HEAD_COUNTS,
    LABELS,
    QUICK,
    TIMED,
    FastPathOff,
    Row,
    Sweep,
    Timing,
    flop_breakdown,
    forward_flops,
    pass_flops,
    prepare,
    run_sweep,
    time_in_rounds,
    timed_modules,
    write_csv,
)
from .usage import Usage, resource_use

__all__ = [
    "HeldInMemory",
    "held_in_memory",
    "BENCHED",
    "COLUMNS",
    "CSV_COLUMNS",
    "FULL",
    "HEAD_COUNTS",
    "KEEP_FREED_MEMORY",
    "LABELS",
    "QUICK",
    "SETTINGS",
    "SPREAD_WORDS",
    "TARGETS",
    "TIMED",
    "Experiment",
    "FastPathOff",
    "Probe",
    "Row",
    "Sweep",
    "Target",
    "Timing",
    "Usage",
    "allocator_experiment",
    "allocator_table",
    "allocator_verdict",
    "causal_block_prediction",
    "check_targets",
    "compare",
    "flop_breakdown",
    "forward_flops",
    "markdown",
    "BlockTimer",
    "measure",
    "method_note",
    "overhead_crossover",
    "part_of_whole",
    "pass_flops",
    "phone_tables",
    "prepare",
    "ratios",
    "report_targets",
    "resource_use",
    "run_sweep",
    "score_steps",
    "select",
    "speedup_lines",
    "summary",
    "target_verdict",
    "time_causal_attention",
    "time_in_rounds",
    "timed_modules",
    "timing_tables",
    "usage_table",
    "verdicts",
    "write_csv",
]
