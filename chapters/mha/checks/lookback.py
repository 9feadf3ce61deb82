"""Chapter 4's exercise: split a model of width 24 so it learns three offsets.

The variant of the chapter's task looks back 1, 3 and 6 tokens. The reader
builds a ``LookbackModel`` for it, keeping ``d_model=24``, with the number
of heads that gives every offset a head of its own and keeps each head as
wide as possible: three heads of width 8. The check reads the configuration,
names the mistake when there is one, and otherwise trains a fresh, seeded
copy to show that it learns every offset.
"""

import textwrap

import torch

from ..attention import MultiHeadAttention
from ..tasks import LookbackModel, LookbackTask, read_heads
from ..train import train
from .core import CheckResult, Exercise, never_raises

#: The exercise's task and the width the reader must keep; the chapter's own task, to recognise
#: a model copied from above; how the check trains the reader's configuration, and what counts
#: as learning an offset.
VARIANT, WIDTH, CHAPTER_TASK = LookbackTask(offsets=(1, 3, 6)), 24, LookbackTask()
STEPS, SEED, LEARNED = 200, 0, 0.95
BUILD = "LookbackModel(variant, d_model=24, num_heads=...)"

# fmt: off
#: (what is wrong with the answer, what to tell the reader); the first that holds is told.
NOT_A_MODEL = (
    (lambda a: a is None, "my_model is still None. Build the model and pass it: my_model = "
     f"{BUILD}, with the number of heads you choose."),
    (lambda a: a is LookbackModel, "You passed the class LookbackModel itself. Call it to build "
     f"a model: my_model = {BUILD}."),
    (lambda a: isinstance(a, int) and not isinstance(a, bool), "You passed the number {a!r}. The "
     "check wants the model built with it: my_model = LookbackModel(variant, d_model=24, "
     "num_heads={a!r})."),
    (lambda a: isinstance(a, MultiHeadAttention), "You passed a MultiHeadAttention. LookbackModel "
     "builds one inside, between the embeddings and the readouts: pass the whole model, "
     f"my_model = {BUILD}."),
    (lambda a: not isinstance(a, LookbackModel), "The check expects a LookbackModel, but got "
     f"{{kind}}. Build one: my_model = {BUILD}."))
#: (what is wrong with the model's configuration, what to tell the reader).
MODEL = (
    (lambda m: m.task == CHAPTER_TASK, "Your model is built for the chapter's task, which looks "
     f"back {CHAPTER_TASK.offsets}. The exercise is the variant, which looks back "
     f"{VARIANT.offsets}: pass variant as the first argument."),
    (lambda m: m.task != VARIANT, "Your model is built for a task that looks back {offsets_seen} "
     "(or differs from the variant in another setting, such as the order of its offsets, which "
     "decides which readout answers which). Build it for the variant itself, which looks back "
     f"{VARIANT.offsets}: pass variant as the first argument."),
    (lambda m: m.attention.d_out != WIDTH, "Your model is {d_model} wide. Keep d_model=24: the "
     "question is how to split one fixed width (and so one fixed parameter count) into heads, "
     "not how wide a model has to be."),
    (lambda m: m.attention.num_heads == 1, "One head of width 24 has one attention pattern. To "
     "serve three offsets it has to spread its weight over three positions, and its output then "
     "mixes their tokens, so no readout can tell which token came from where. Give every offset "
     "a head of its own."),
    (lambda m: m.attention.num_heads < len(VARIANT.offsets), "{num_heads} heads for {offsets} "
     "offsets: at least one head has to cover two positions, and its output mixes their tokens. "
     "Give every offset a head of its own."),
    (lambda m: m.attention.num_heads == len(CHAPTER_TASK.offsets), "4 heads was the answer for "
     "the chapter's four offsets. The variant has three: with 4 heads of width 6, two heads end "
     "up serving the same offset, and every head is narrower than it needs to be. How many "
     "patterns does the variant need, and what does that leave for the width of each head?"),
    (lambda m: m.attention.num_heads > len(VARIANT.offsets), "{num_heads} heads of width "
     "{head_dim} for {offsets} offsets: more heads than offsets. It may well train, but the "
     "heads are narrower than they need to be, and some serve the same offset. The exercise asks "
     "for the widest heads that still give every offset a head of its own."))
# fmt: on


def trained_copy(model):
    """A fresh model with ``model``'s configuration, trained from ``SEED``; the reader's own
    model and random state are left as they were."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(SEED)
        copy = LookbackModel(model.task, model.attention.d_out, model.attention.num_heads)
    train(copy, STEPS, progress=False)
    return copy


@never_raises
def check_lookback_model(my_model):
    """Check the reader's model for the variant task: name the first mistake of the answer or
    of its configuration, else train a fresh copy and say where each head looks."""
    kind = f"a value of type {type(my_model).__name__}"
    kind = f"the class {my_model.__name__}" if isinstance(my_model, type) else kind
    for wrong, message in NOT_A_MODEL:
        if wrong(my_model):
            return CheckResult(False, message.format(a=my_model, kind=kind))
    heads, width = my_model.attention.num_heads, my_model.attention.head_dim
    facts = dict(
        offsets_seen=my_model.task.offsets,
        d_model=my_model.attention.d_out,
        num_heads=heads,
        head_dim=width,
        offsets=len(VARIANT.offsets),
    )
    for wrong, message in MODEL:
        if wrong(my_model):
            return CheckResult(False, message.format(**facts))
    trained = trained_copy(my_model)
    learned = int((VARIANT.accuracy(trained) >= LEARNED).sum())  # offsets learned
    if learned < len(VARIANT.offsets):
        return CheckResult(
            False,
            f"Your configuration is the intended one, but a fresh copy trained for {STEPS} "
            f"steps learned only {learned} of {len(VARIANT.offsets)} offsets (at least "
            f"{LEARNED * 100:.0f} % right). The check expected all of them: if you changed "
            "LookbackTask, LookbackModel or train, undo that.",
        )
    looks = (f"head {h + 1} looks {k} back" for h, (k, _) in enumerate(read_heads(trained)))
    return CheckResult(
        True,
        f"{heads} heads of width {width}, one per offset. Trained for {STEPS} steps from seed "
        f"{SEED}, it got at least {LEARNED * 100:.0f} % right at every offset: {', '.join(looks)}.",
    )


lookback_heads = Exercise(
    checker=check_lookback_model,
    hints=(
        "Count the offsets the variant looks back: each one needs an attention pattern of its own.",
        "A head has one attention pattern. With d_model fixed at 24, "
        "num_heads decides how many patterns there are and how wide each "
        "head is: head_dim = 24 // num_heads.",
    ),
    solution_code=textwrap.dedent(
        """\
        variant = LookbackTask(offsets=(1, 3, 6))
        torch.manual_seed(0)
        my_model = LookbackModel(variant, d_model=24, num_heads=3)
        lookback_heads.check(my_model)
        """
    ),
)
