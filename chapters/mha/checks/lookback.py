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
from .core import CheckResult, Exercise, Mistake, first_mistake, never_raises

#: The exercise's task and the width the reader must keep.
VARIANT = LookbackTask(offsets=(1, 3, 6))
WIDTH = 24
#: The chapter's own task, to recognise a model copied from above.
CHAPTER_TASK = LookbackTask()
#: How the check trains the reader's configuration, and what counts as
#: learning an offset.
STEPS = 200
SEED = 0
LEARNED = 0.95

BUILD = "LookbackModel(variant, d_model=24, num_heads=...)"

NOT_A_MODEL_MISTAKES = (
    Mistake(
        "nothing built",
        "my_model is still None. Build the model and pass it: my_model = "
        f"{BUILD}, with the number of heads you choose.",
        lambda answer: answer is None,
    ),
    Mistake(
        "the class",
        f"You passed the class LookbackModel itself. Call it to build a model: my_model = {BUILD}.",
        lambda answer: answer is LookbackModel,
    ),
    Mistake(
        "a number",
        "You passed the number {answer!r}. The check wants the model built "
        "with it: my_model = LookbackModel(variant, d_model=24, "
        "num_heads={answer!r}).",
        lambda answer: isinstance(answer, int) and not isinstance(answer, bool),
    ),
    Mistake(
        "the attention module alone",
        "You passed a MultiHeadAttention. LookbackModel builds one inside, "
        "between the embeddings and the readouts: pass the whole model, "
        f"my_model = {BUILD}.",
        lambda answer: isinstance(answer, MultiHeadAttention),
    ),
    Mistake(
        "not a LookbackModel",
        f"The check expects a LookbackModel, but got {{kind}}. Build one: my_model = {BUILD}.",
        lambda answer: not isinstance(answer, LookbackModel),
    ),
)

MODEL_MISTAKES = (
    Mistake(
        "the chapter's task",
        "Your model is built for the chapter's task, which looks back "
        f"{CHAPTER_TASK.offsets}. The exercise is the variant, which looks "
        f"back {VARIANT.offsets}: pass variant as the first argument.",
        lambda m: m.task == CHAPTER_TASK,
    ),
    Mistake(
        "another task",
        "Your model is built for a task that looks back {m.task.offsets} "
        "(or differs from the variant in another setting, such as the order "
        "of its offsets, which decides which readout answers which). Build "
        f"it for the variant itself, which looks back {VARIANT.offsets}: "
        "pass variant as the first argument.",
        lambda m: m.task != VARIANT,
    ),
    Mistake(
        "another width",
        "Your model is {d_model} wide. Keep d_model=24: the question is how "
        "to split one fixed width (and so one fixed parameter count) into "
        "heads, not how wide a model has to be.",
        lambda m: m.attention.d_out != WIDTH,
    ),
    Mistake(
        "one head",
        "One head of width 24 has one attention pattern. To serve three "
        "offsets it has to spread its weight over three positions, and its "
        "output then mixes their tokens, so no readout can tell which token "
        "came from where. Give every offset a head of its own.",
        lambda m: m.attention.num_heads == 1,
    ),
    Mistake(
        "fewer heads than offsets",
        "{num_heads} heads for {offsets} offsets: at least one head has to "
        "cover two positions, and its output mixes their tokens. Give "
        "every offset a head of its own.",
        lambda m: m.attention.num_heads < len(VARIANT.offsets),
    ),
    Mistake(
        "the chapter's head count",
        "4 heads was the answer for the chapter's four offsets. The "
        "variant has three: with 4 heads of width 6, two heads end up "
        "serving the same offset, and every head is narrower than it needs "
        "to be. How many patterns does the variant need, and what does "
        "that leave for the width of each head?",
        lambda m: m.attention.num_heads == len(CHAPTER_TASK.offsets),
    ),
    Mistake(
        "more heads than offsets",
        "{num_heads} heads of width {head_dim} for {offsets} offsets: "
        "more heads than offsets. It may well train, but the heads are "
        "narrower than they need to be, and some serve the same offset. The "
        "exercise asks for the widest heads that still give every offset "
        "a head of its own.",
        lambda m: m.attention.num_heads > len(VARIANT.offsets),
    ),
)


def _result(passed, text):
    """A ``CheckResult``; its text form wraps itself, its HTML flows."""
    return CheckResult(passed, text)


def _kind(answer):
    if isinstance(answer, type):
        return f"the class {answer.__name__}"
    return f"a value of type {type(answer).__name__}"


def trained_copy(model):
    """A fresh model with ``model``'s configuration, trained from ``SEED``.

    The reader's own model and random state are left as they were.
    """
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(SEED)
        copy = LookbackModel(model.task, model.attention.d_out, model.attention.num_heads)
    train(copy, STEPS, progress=False)
    return copy


@never_raises
def check_lookback_model(my_model):
    """Check the reader's model for the variant task; never raises."""
    mistake = first_mistake(NOT_A_MODEL_MISTAKES, my_model)
    if mistake is not None:
        return _result(False, mistake.message.format(answer=my_model, kind=_kind(my_model)))
    attention = my_model.attention
    details = {
        "m": my_model,
        "d_model": attention.d_out,
        "num_heads": attention.num_heads,
        "head_dim": attention.head_dim,
        "offsets": len(VARIANT.offsets),
    }
    mistake = first_mistake(MODEL_MISTAKES, my_model)
    if mistake is not None:
        return _result(False, mistake.message.format(**details))
    trained = trained_copy(my_model)
    accuracy = VARIANT.accuracy(trained)  # (num_offsets,)
    learned = int((accuracy >= LEARNED).sum())
    if learned < len(VARIANT.offsets):
        return _result(
            False,
            f"Your configuration is the intended one, but a fresh copy "
            f"trained for {STEPS} steps learned only {learned} of "
            f"{len(VARIANT.offsets)} offsets (at least {LEARNED * 100:.0f} % "
            "right). The check expected all of them: if you changed "
            "LookbackTask, LookbackModel or train, undo that.",
        )
    looks = ", ".join(
        f"head {h + 1} looks {k} back" for h, (k, _) in enumerate(read_heads(trained))
    )
    return _result(
        True,
        f"{attention.num_heads} heads of width {attention.head_dim}, one per "
        f"offset. Trained for {STEPS} steps from seed {SEED}, it got at "
        f"least {LEARNED * 100:.0f} % right at every offset: {looks}.",
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
