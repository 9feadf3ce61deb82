"""Chapter 4's exercise: split a model of width 24 into one head per offset, trained to check."""

from dataclasses import replace

import torch

from ..tasks import LookbackModel, LookbackTask, read_heads
from ..train import train
from .core import CheckResult, never_raises

#: The exercise's task and width, and how the check trains its copy of the answer.
VARIANT, WIDTH = LookbackTask(offsets=(1, 3, 6)), 24
STEPS, SEED, LEARNED = 200, 0, 0.95
BUILD = "LookbackModel(variant, d_model=24, num_heads=...)"


# fmt: off
def mistake(answer):
    """What is wrong with the answer or its configuration, or None."""
    if answer is None:  # the starting code
        return (f"my_model is still None. Build the model and pass it: my_model = {BUILD}, with "
                "the number of heads you choose.")
    if not isinstance(answer, LookbackModel):
        kind = f"a value of type {type(answer).__name__}"
        kind = f"the class {answer.__name__}" if isinstance(answer, type) else kind
        return f"The check expects a LookbackModel, but got {kind}. Build one: my_model = {BUILD}."
    if replace(answer.task, offsets=tuple(sorted(answer.task.offsets))) != VARIANT:  # any order
        return (f"Your model is built for a task that looks back {answer.task.offsets} or "
                "differs from the variant in another setting: pass variant as the first argument.")
    heads, width = answer.attention.num_heads, answer.attention.head_dim
    if answer.attention.d_out != WIDTH:
        return (f"Your model is {answer.attention.d_out} wide. Keep d_model=24: the question is "
                "how to split one fixed width into heads.")
    count = f"{heads} head{'s' * (heads > 1)} of width {width} for {len(VARIANT.offsets)} offsets"
    if heads < len(VARIANT.offsets):
        return (f"{count}: a head has one attention pattern, so a head has to serve several "
                "offsets and mixes their tokens. Give every offset a head of its own.")
    if heads > len(VARIANT.offsets):
        return (f"{count}: more heads than offsets, narrower than they need be. How many patterns "
                "does the variant need, and what does that leave for the width of each head?")
    return None


@never_raises
def check_lookback_model(my_model):
    """Name the answer's mistake, else train a fresh copy from ``SEED`` (the reader's model and
    random state left alone) and say where each head looks."""
    if message := mistake(my_model):
        return CheckResult(False, message)
    heads, width = my_model.attention.num_heads, my_model.attention.head_dim
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(SEED)
        trained = LookbackModel(my_model.task, WIDTH, heads)
        train(trained, STEPS, progress=False)
    learned = int((my_model.task.accuracy(trained) >= LEARNED).sum())  # offsets learned
    if learned < len(VARIANT.offsets):
        return CheckResult(False, f"Your configuration is the intended one, but a fresh copy "
                           f"trained for {STEPS} steps learned only {learned} of "
                           f"{len(VARIANT.offsets)} offsets (at least {LEARNED * 100:.0f} % "
                           "right). The check expected all of them: if you changed LookbackTask, "
                           "LookbackModel or train, undo that.")
    looks = (f"head {h + 1} looks {k} back" for h, (k, _) in enumerate(read_heads(trained)))
    return CheckResult(True, f"{heads} heads of width {width}, one per offset. Trained for {STEPS} "
                       f"steps from seed {SEED}, it got at least {LEARNED * 100:.0f} % right at "
                       f"every offset: {', '.join(looks)}.")
# fmt: on
