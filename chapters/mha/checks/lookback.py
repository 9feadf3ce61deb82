"""Chapter 4's exercise: split a model of width 24 so it learns three offsets, 1, 3 and 6 back.

The answer is three heads of width 8: one per offset, each as wide as it can be. The check names
the first mistake of the answer or its configuration, else trains a fresh seeded copy and says
where each head looks.
"""

import textwrap

import torch

from ..attention import MultiHeadAttention
from ..tasks import LookbackModel, LookbackTask, read_heads
from ..train import train
from .core import CheckResult, Exercise, never_raises

#: The exercise's task and width; the chapter's task (a model copied from above); the training.
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
    (lambda a: isinstance(a, int) and not isinstance(a, bool), "You passed the number {a!r}: "
     "build the model with it, my_model = LookbackModel(variant, d_model=24, num_heads={a!r})."),
    (lambda a: isinstance(a, MultiHeadAttention), "You passed a MultiHeadAttention: pass the "
     f"whole model, which builds one inside, my_model = {BUILD}."),
    (lambda a: not isinstance(a, LookbackModel), "The check expects a LookbackModel, but got "
     f"{{kind}}. Build one: my_model = {BUILD}."))
#: (what is wrong with the model's configuration, what to tell the reader).
MODEL = (
    (lambda m: m.task == CHAPTER_TASK, f"Your model is built for the chapter's task, which looks "
     f"back {CHAPTER_TASK.offsets}: pass variant, which looks back {VARIANT.offsets}."),
    (lambda m: m.task != VARIANT, "Your model is built for a task that looks back {offsets_seen} "
     "or differs from the variant in another setting: pass variant as the first argument."),
    (lambda m: m.attention.d_out != WIDTH, "Your model is {d_model} wide. Keep d_model=24: the "
     "question is how to split one fixed width into heads."),
    (lambda m: m.attention.num_heads == 1, "One head of width 24 has one attention pattern: to "
     "serve three offsets its output mixes their tokens. Give every offset a head of its own."),
    (lambda m: m.attention.num_heads < len(VARIANT.offsets), "{num_heads} heads for {offsets} "
     "offsets: a head has to cover two positions. Give every offset a head of its own."),
    (lambda m: m.attention.num_heads == len(CHAPTER_TASK.offsets), "4 heads was the answer for "
     "the chapter's four offsets. How many patterns does the variant need, and what does that "
     "leave for the width of each head?"),
    (lambda m: m.attention.num_heads > len(VARIANT.offsets), "{num_heads} heads of width "
     "{head_dim} for {offsets} offsets: more heads than offsets, narrower than they need be."))
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
