"""Chapter 1's exercise: the wrapper's forward, judged on a watched run (:data:`MISTAKES`)."""

from functools import partial

from ..starting import WrapperSkeleton
from .core import Mistake, fill, first_mistake
from .joins import JOINED, NO_OUTPUT, NOT_X, ONE_SEQUENCE, RAISED, REORDERED, SHARED, Heads
from .practice import NOT_WRITTEN, Practice, checker, verdict
from .reference import same
from .runs import batch_in_code

#: (d_in, d_out, context_length, dropout, num_heads, qkv_bias, num_tokens): three heads first
#: (chains, order and joins all show), then d_in = d_out (a chain runs without an error) with
#: dropout (off in eval mode) on a short input, then one head.
ROWS = ((3, 2, 6, 0.0, 3, 0, 6), (4, 4, 6, 0.25, 2, 0, 5), (5, 3, 6, 0.0, 1, 0, 4))
STARTING = (f"{NOT_WRITTEN} What should each head be given, and what becomes of the heads' "
            "outputs? The first hint, just below the check, starts from there.")  # fmt: skip


def columns(x, call):
    """Whether a head's ``call`` (number, input) was given a run of ``x``'s columns, not all."""
    width = call[1].shape[-1]
    starts = range(x.shape[-1] - width + 1) if width < x.shape[-1] else ()
    return any(same(call[1], x[..., s : s + width]) for s in starts)


# fmt: off
#: Known mistakes, most specific first, on a run's :class:`.joins.Heads`.
MISTAKES = (
    Mistake("no list of heads", "Your instance has no list of heads in self.heads: subclass "
            "WrapperSkeleton, which builds them, and write only forward.", lambda e: not e.heads),
    Mistake("the list of heads called", "Your forward calls the list of heads itself, and PyTorch "
            "raised {error_text}: an nn.ModuleList holds the heads but computes nothing. Call "
            "each head in it on x.", lambda e: "ModuleList" in str(e.error)),
    Mistake("the starting code", STARTING, lambda e: isinstance(e.error, NotImplementedError)),
    ONE_SEQUENCE,
    Mistake("columns", "Head {fed} was given some of x's columns: every head reads all of x, "
            "(b, num_tokens, d_in).", lambda e: any(map(partial(columns, e.x), e.run[1]))),
    NOT_X,
    *JOINED,
    RAISED,
    SHARED,
    Mistake("not every head ran once", "Not every head in self.heads ran once as head(x): call "
            "each head on x, once (a head called again, in a print too, runs again), not its "
            "layers or PyTorch's attention.",
            lambda e: sorted(n for n, _ in e.run[1]) != list(range(1, e.num_heads + 1))),
    NO_OUTPUT,
    REORDERED,
    Mistake("averaged", "Your output is the heads' outputs side by side, divided by num_heads: "
            "joining them needs no average.",
            lambda e: e.num_heads > 1 and same(e.output * e.num_heads, e.right)),
    Mistake("not the heads side by side", "Each head ran once on x, but your output is not their "
            "outputs side by side, and matches no mistake this check knows: see hint(3), on "
            "joining them.", lambda e: not same(e.output, e.right)))
# fmt: on


def judge(p, run):
    """What is wrong with one run, or None: :func:`.practice.verdict`'s when the constructor raised
    or the book's classes did the work (its heads aside), else the first of :data:`MISTAKES`."""
    run.calls[:] = [c for c in run.calls if c != "CausalAttention.forward"]  # its heads'
    if run.stage == "constructor" or run.calls or batch_in_code(run.facts()):
        return verdict(p, run)
    found = first_mistake(MISTAKES, heads := Heads(run.module, run.x))
    return found and fill(found.message, heads)


WRAPPER = Practice(
    start=WrapperSkeleton, rows=ROWS, judge=judge, quiet=True, starting=STARTING,
    praise="With 1, 2 and 3 heads, every head reads the same x once, and their outputs sit side "
    "by side on the last axis, in list order: num_heads × d_out values per token.",
)  # fmt: skip
#: Checks chapter 1's exercise: every head run once on ``x``, joined on the last axis.
check_wrapper = checker(WRAPPER, "check_wrapper")
