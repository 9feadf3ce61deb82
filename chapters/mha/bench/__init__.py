"""The benchmark of chapter 5 and of ``python -m mha.bench``: time, judge, report.

Imports run one way, from the bottom of this list to the top:

- ``report``: the results as text, for the chapter, the terminal and the README;
- ``faults``: the allocator experiment (do page faults cost a module its speed?);
- ``comparison``: noise-aware verdicts between timings, and the book's performance targets;
- ``timing``: the modules, the timer, the sweeps and their ``Row``s;
- ``usage``: CPU time and page faults per call, from ``resource.getrusage``.

``__main__`` is the command line (``python -m mha.bench --help``); the figures are in
``mha.plots_bench``. This file only gathers the names chapters and tests use, so that
``from mha.bench import ...`` reaches all of them.
"""

from .comparison import (
    TARGETS,
    Target,
    check_targets,
    compare,
    overhead_crossover,
    part_of_whole,
    ratios,
    report_targets,
    select,
    target_verdict,
    time_causal_attention,
    verdicts,
)
from .faults import (
    KEEP_FREED_MEMORY,
    SETTINGS,
    Probe,
    allocator_experiment,
    allocator_table,
    allocator_verdict,
)
from .report import markdown, method_note, speedup_lines, summary, timing_tables, usage_table
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
    measure,
    pass_flops,
    prepare,
    run_sweep,
    time_in_rounds,
    timed_modules,
    write_csv,
)
from .usage import Usage, resource_use

__all__ = [
    "BENCHED",
    "COLUMNS",
    "CSV_COLUMNS",
    "FULL",
    "HEAD_COUNTS",
    "KEEP_FREED_MEMORY",
    "LABELS",
    "QUICK",
    "SETTINGS",
    "TARGETS",
    "TIMED",
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
    "check_targets",
    "compare",
    "flop_breakdown",
    "forward_flops",
    "markdown",
    "measure",
    "method_note",
    "overhead_crossover",
    "part_of_whole",
    "pass_flops",
    "prepare",
    "ratios",
    "report_targets",
    "resource_use",
    "run_sweep",
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
