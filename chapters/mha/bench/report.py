"""The benchmark's results as text: tables for the chapter and the terminal, Markdown for
BENCHMARKS.md. Sentences wrap at 79 characters (the chapter shows them in boxes that wrap on any
screen); the chapter's tables keep to ``PHONE`` characters, what a phone's output box shows."""

import datetime
import textwrap

from .comparison import overhead_crossover, ratios, select, verdicts
from .timing import BENCHED, COLUMNS

WIDTH = 79
#: Characters a 390 px phone shows in one line of an output box.
PHONE = 44
#: Implementations per table in the chapter's tables, so that a line stays within PHONE.
PER_TABLE = 3
#: What a table shows for an implementation the sweep did not time at a configuration.
MISSING = "-"


def _key(sweep):
    return "num_tokens" if sweep == "tokens" else "num_heads"


def _names(rows, sweep):
    return [n for n in BENCHED if select(rows, sweep, n)]


def table(rows, sweep, value="median_ms", fmt="{:.3f}", names=None):
    """A text table of ``value`` per implementation (columns) at each configuration of ``sweep``.

    Each line is 10 + 11 characters per implementation: three fit a phone (``phone_tables``).
    An implementation not timed at a configuration (``Sweep.at_longest``) shows ``MISSING``.
    """
    key = _key(sweep)
    names = names or _names(rows, sweep)
    keys = list(dict.fromkeys(getattr(r, key) for r in rows if r.sweep == sweep))
    lines = [f"{key:>10}" + "".join(f"{COLUMNS[n]:>11}" for n in names)]
    for k in keys:
        cells = {
            r.implementation: getattr(r, value)
            for r in rows
            if r.sweep == sweep and getattr(r, key) == k
        }
        lines.append(f"{k:>10}" + "".join(f"{_cell(cells, n, fmt):>11}" for n in names))
    return "\n".join(lines)


def _cell(cells, name, fmt):
    return fmt.format(cells[name]) if name in cells else MISSING


def _what(rows):
    return "training step" if rows[0].timed == "forward+backward" else "forward"


def method_note(rows, sweep):
    """How many rounds and blocks stand behind the medians, and how many hit the time caps."""
    fewest = min(rows, key=lambda r: r.blocks)
    capped = [r for r in rows if r.capped]
    rounds = min(r.rounds for r in rows)
    text = (
        f"Each median is taken over at least {fewest.blocks} timed "
        f"{'block' if fewest.blocks == 1 else 'blocks'} (the fewest: "
        f"{fewest.implementation}, num_tokens {fewest.num_tokens}, num_heads {fewest.num_heads}). "
    )
    if rounds < sweep.rounds:
        text += (
            f"The budget of {sweep.budget:g} s ran out after {rounds} of {sweep.rounds} rounds. "
        )
    if capped:
        text += (
            f"{len(capped)} of {len(rows)} measurements stopped at a cap "
            f"({sweep.max_run_time:g}"
            " s per measurement, or the budget) before they had the blocks they aimed for, "
            "so their medians rest on fewer samples than planned."
        )
    else:
        text += (
            f"No measurement needed more than the cap of {sweep.max_run_time:g} s or the "
            f"budget of {sweep.budget:g} s."
        )
    return textwrap.fill(text, WIDTH)


def phone_tables(rows, sweep, value="median_ms", fmt="{:.3f}"):
    """``table`` for every implementation, ``PER_TABLE`` at a time, one under the other."""
    names = _names(rows, sweep)
    groups = [names[i : i + PER_TABLE] for i in range(0, len(names), PER_TABLE)]
    return "\n\n".join(table(rows, sweep, value, fmt, group) for group in groups)


def timing_tables(rows, sweeps=("heads", "tokens")):
    """The medians of the ``sweeps`` asked for ("heads", "tokens" or both) as text tables a
    phone shows whole (``phone_tables``).

    ``method_note`` says how many blocks and rounds stand behind them. Chapter 5 prints the
    length sweep only after its question about the longest sequence.
    """
    unknown = set(sweeps) - {"heads", "tokens"}
    if unknown or not sweeps:
        raise ValueError(f"sweeps must name 'heads', 'tokens' or both, got {sweeps!r}")
    what = _what(rows)
    tables = []
    for sweep in sweeps:
        first = select(rows, sweep, "wrapper")[0]
        fixed = f"{first.num_tokens} tokens" if sweep == "heads" else f"{first.num_heads} heads"
        axis = "num_heads" if sweep == "heads" else "num_tokens"
        tables.append(f"median ms per {what},\nvs {axis} ({fixed}):\n" + phone_tables(rows, sweep))
    return "\n\n".join(tables)


def usage_table(rows, num_tokens):
    """Median wall time, CPU time in user mode and in the kernel, and page faults, per pass at
    ``num_tokens``: at most ``PHONE`` characters a line."""
    found = [r for r in rows if r.sweep == "tokens" and r.num_tokens == num_tokens]
    lines = [
        f"at {num_tokens} tokens, per {_what(rows)}:",
        f"{'':<11}{'ms':>8}{'user ms':>8}{'sys ms':>8}{'faults':>9}",
    ]
    for r in found:
        lines.append(
            f"{COLUMNS[r.implementation]:<11}{r.median_ms:>8.2f}{r.user_ms:>8.2f}"
            f"{r.sys_ms:>8.2f}{r.minor_faults:>9,.0f}"
        )
    return "\n".join(lines)


def speedup_lines(rows, numerator="wrapper", denominator="split"):
    """``numerator`` time / ``denominator`` time per length, with the noise-aware verdict."""
    speedup = ratios(rows, numerator, denominator)
    verdict = verdicts(rows, denominator, numerator)
    return [f"{t:>6} tokens: {r:5.2f}×  ({denominator} {verdict[t]})" for t, r in speedup.items()]


def summary(rows):
    """The command line's summary: medians, the split's speedup, the crossover, GFLOP/s."""
    first = rows[0]
    lines = [
        f"batch {first.batch}, d_in = d_out = {first.d_out}, timed: {first.timed}",
        f"matmul ceiling (large torch.mm): {first.ceiling_gflops:.1f} GFLOP/s",
        "",
        phone_tables(rows, "heads"),
        "",
        phone_tables(rows, "tokens"),
        "",
        "wrapper time / split time (and whether the split was faster beyond the spread):",
        *speedup_lines(rows),
    ]
    crossover = overhead_crossover(rows)
    lines.append(
        "the wrapper stops being overhead-bound at "
        + (f"about {crossover:.0f} tokens" if crossover else "no measured length")
    )
    lines += [
        "",
        "achieved GFLOP/s vs num_tokens:",
        phone_tables(rows, "tokens", "gflops", "{:.1f}"),
        "",
        usage_table(rows, max(r.num_tokens for r in rows)),
    ]
    return "\n".join(lines)


def markdown(rows, sweep, machine, argv):
    """The body of BENCHMARKS.md, from one run of ``python -m mha.bench``."""
    first = select(rows, "tokens", "wrapper")[0]
    names = _names(rows, "tokens")
    longest = max(r.num_tokens for r in select(rows, "tokens", "wrapper"))
    command = " ".join(["python -m mha.bench", *argv])
    speedup = ratios(rows, "wrapper", "split")
    verdict = verdicts(rows, "split", "wrapper")
    lines = [
        textwrap.fill(
            f"One run on one machine, not a promise: chapter 5 measures your own. "
            f"{machine}; run on {datetime.date.today().isoformat()}. "
            f"Produced from `chapters/` by",
            WIDTH,
        ),
        "",
        "```bash",
        command,
        "```",
        "",
        textwrap.fill(
            f"Median milliseconds per {_what(rows)} (quietest of {sweep.rounds} "
            f"rounds), batch {first.batch}, `d_in` = `d_out` = {first.d_out}, "
            f"{first.num_heads} heads; the last columns are the wrapper's time over "
            "the split's and whether the split was faster beyond the measured spread "
            "(quartiles that do not overlap):",
            WIDTH,
        ),
        "",
        "| num_tokens | " + " | ".join(f"`{n}`" for n in names) + " | wrapper / split | split |",
        "|---:|" + "---:|" * len(names) + "---:|---|",
    ]
    for t in [r.num_tokens for r in select(rows, "tokens", "wrapper")]:
        cells = {
            r.implementation: r.median_ms for r in rows if r.sweep == "tokens" and r.num_tokens == t
        }
        lines.append(
            f"| {t} | "
            + " | ".join(_cell(cells, n, "{:.2f}") for n in names)
            + f" | {speedup[t]:.2f}× | {verdict[t]} |"
        )
    at_longest = [r for r in rows if r.sweep == "tokens" and r.num_tokens == longest]
    lines += [
        "",
        textwrap.fill(
            f"At {longest} tokens, per {_what(rows)}: "
            + "; ".join(
                f"`{r.implementation}` {r.sys_ms:.1f} ms of system time and {r.minor_faults:,.0f} "
                "minor page faults"
                for r in at_longest
            )
            + ".",
            WIDTH,
        ),
        "",
        textwrap.fill(
            f"Matrix-multiplication ceiling (a {sweep.ceiling_size} × "
            f"{sweep.ceiling_size} `torch.mm`): {first.ceiling_gflops:.0f} GFLOP/s. "
            f"{method_note(rows, sweep)}",
            WIDTH,
        ),
    ]
    return "\n".join(lines)
