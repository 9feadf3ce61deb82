"""Training for chapter 4: full-batch Adam on a fixed set, on one thread.

Each step sees the whole fixed training set, so nothing is drawn at random
while training: with the model built after ``torch.manual_seed``, a run is
fully determined on a given machine. Training runs on one thread, whatever
``OMP_NUM_THREADS`` says, so the sums inside every matrix multiplication are
added in the same order on one core or many, and the trained numbers are the
same however many cores there are.

Another CPU or another math library may still round the last bit of some
sums differently (other vector instructions, another kernel), and training
can amplify such a bit into a visibly different model. The chapter therefore
prints only what survives that: accuracies in bands, counts of offsets
learned, thresholds passed with a margin. ``tests/test_chapter4_claims.py``
trains seeds 0 to 7 to show that what the chapter says holds beyond one, and
that the one claim stated for most seeds, not all, holds on at least 5 of 8.

In a notebook the progress bar draws in one output that it replaces in
place, and when training ends that output goes back to its first line, which
names the run. A re-run of the notebook (``nbval``) therefore sees the same
output as the stored one, and nothing is written to stderr.
"""

import contextlib
import io
import math
import os
import sys
import traceback

import torch
from tqdm import tqdm


def train(
    model, steps=200, lr=0.01, *, resume=False, keep_best=False, progress=True, label="training"
):
    """Train ``model`` on its task's training set; return the loss per step.

    ``resume=True`` trains on from where the last ``train`` call on this
    model stopped, with the same Adam and its running averages (kept on the
    model as ``model.optimiser``): 200 steps and then 600 more give exactly
    the model that 800 steps in one call give (``lr`` is the first call's).
    ``keep_best=True`` ends the run on its step with the lowest training
    loss: full-batch Adam at this rate has loss spikes now and then (the
    loss several times higher, ten points fewer answers right, and tens of
    steps to recover), and a model read in one reads low. When the last
    step leaves a higher loss than an earlier one saw, the weights and
    Adam's state go back to the lowest, wherever it fell: for a model on a
    plateau, whose loss wobbles, that can be well before the end.
    ``progress=False`` is the quiet mode (tests): no bar, no output. The
    model comes back in eval mode.
    """
    _check_steps(steps)
    task = model.task
    tokens = task.train_set()  # (train_size, num_tokens)
    optimiser = model.optimiser = _optimiser(model, resume, lr)
    best = LowestLoss(model, optimiser) if keep_best else None
    losses = []
    model.train()
    with one_thread(), progress_bar(steps, label, progress) as bar:
        for _ in range(steps):
            loss = task.loss(model(tokens), tokens)
            if best is not None:
                best.offer(loss.item())
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
            losses.append(loss.item())
            bar.update(1)
        if best is not None:
            with torch.no_grad():
                best.offer(task.loss(model(tokens), tokens).item())
            best.restore()
    model.eval()
    return losses


class LowestLoss:
    """The weights and Adam state of the step with the lowest training loss seen so far.

    ``offer(loss)`` is called with the loss of the weights as they are now, before the step
    that changes them; ``restore()`` puts the lowest one's weights and Adam state back.
    """

    def __init__(self, model, optimiser):
        self.model, self.optimiser = model, optimiser
        self.loss, self.saved = math.inf, None

    def offer(self, loss):
        if loss < self.loss:
            weights = {name: t.clone() for name, t in self.model.state_dict().items()}
            self.loss, self.saved = loss, (weights, self.optimiser.state_dict())

    def restore(self):
        weights, adam = self.saved
        self.model.load_state_dict(weights)
        self.optimiser.load_state_dict(adam)


def train_all(
    models, steps=200, lr=0.01, *, resume=False, keep_best=False, labels=None, progress=True
):
    """``train`` every model of ``models`` (``{key: model}``); return ``{key: losses}``.

    The models are independent, so on Linux each trains in its own copy of this process
    (``os.fork``), side by side, and sends back its weights, its Adam state and its losses:
    on a machine with several cores the trainings take the time of the slowest one, not of all
    together. Each copy trains on one thread with the arithmetic of ``train``, so every model
    comes back the same to the bit as ``train`` would make it here (``tests/test_train.py``
    compares). Elsewhere (no ``fork``, or macOS, where a copy of a process that has used
    torch is not safe), the models train one after another. ``labels`` (``{key: label}``) name
    the progress bars; each bar fills when its model is done. ``lr``, ``resume`` and
    ``keep_best`` are ``train``'s.
    """
    labels = labels or {}
    options = {"lr": lr, "resume": resume, "keep_best": keep_best}
    if not hasattr(os, "fork") or sys.platform != "linux":
        return {
            key: train(
                model, steps, **options, progress=progress, label=labels.get(key, "training")
            )
            for key, model in models.items()
        }
    _check_steps(steps)  # the checks of train, before any copy starts
    for model in models.values():
        if resume:
            _optimiser(model, resume, lr)
    running = {key: _forked_training(model, steps, options) for key, model in models.items()}
    losses = {}
    for key, (pid, read) in running.items():
        label = labels.get(key, "training")
        with progress_bar(steps, label, progress) as bar, os.fdopen(read, "rb") as pipe:
            sent = pipe.read()
            os.waitpid(pid, 0)
            if not sent:
                raise RuntimeError(f"training {label!r} failed: its process sent nothing")
            found = torch.load(io.BytesIO(sent), weights_only=True)
            if "error" in found:
                raise RuntimeError(f"training {label!r} failed:\n{found['error']}")
            _take_back(models[key], found, lr, resume)
            losses[key] = found["losses"]
            bar.update(steps)
    return losses


def _forked_training(model, steps, options):
    """Start ``train(model, steps, **options)`` in a copy of this process; return the copy's
    id and the reading end of the pipe that brings back what it trained (``_take_back``)."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the copy: it writes nothing else and skips the caller's clean-up
        try:
            os.close(read)
            buffer = io.BytesIO()  # torch.save needs a file it can seek in
            torch.save(_trained(model, steps, options), buffer)
            with os.fdopen(write, "wb") as pipe:
                pipe.write(buffer.getvalue())
        finally:
            os._exit(0)
    os.close(write)
    return pid, read


def _trained(model, steps, options):
    """What a copy sends back after ``train``: weights, Adam state, losses (or the error)."""
    try:
        losses = train(model, steps, **options, progress=False)
    except BaseException:
        return {"error": traceback.format_exc()}
    return {"state": model.state_dict(), "adam": model.optimiser.state_dict(), "losses": losses}


def _take_back(model, found, lr, resume):
    """Put the weights and the Adam state a copy trained into ``model``, in place (into its
    Adam when the copy resumed it, else into a new one, as ``train`` makes)."""
    model.load_state_dict(found["state"])
    optimiser = model.optimiser if resume else FullBatchAdam(model.parameters(), lr=lr)
    model.optimiser = optimiser
    optimiser.load_state_dict(found["adam"])
    model.eval()


def _check_steps(steps):
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise ValueError(f"train: steps must be a positive integer, got {steps!r}.")


def _optimiser(model, resume, lr):
    """The ``FullBatchAdam`` that trains ``model``: its last one when ``resume``, else new."""
    if not resume:
        return FullBatchAdam(model.parameters(), lr=lr)
    optimiser = getattr(model, "optimiser", None)
    if not isinstance(optimiser, FullBatchAdam):
        raise ValueError(
            "train: resume=True continues an earlier run, but this model "
            "has not been trained yet. Call train(model, steps) first, "
            "or leave out resume=True."
        )
    return optimiser


class FullBatchAdam:
    """Adam with ``torch.optim.Adam``'s defaults, step for step the arithmetic of its
    single-tensor path (the one it takes on the CPU), in a few lines.

    Why not ``torch.optim.Adam`` itself: every ``torch.optim`` optimiser imports
    ``torch._dynamo`` the first time it steps, about 4 s of CPU in a fresh process, more than
    the chapter's first 600 training steps. The updates here are the same operations in the
    same order, so the trained weights are the same to the bit
    (``tests/test_train.py`` trains with both and compares).
    """

    def __init__(self, params, lr=0.01, betas=(0.9, 0.999), eps=1e-8):
        self.params = list(params)
        self.lr, (self.beta1, self.beta2), self.eps = lr, betas, eps
        self.steps = 0
        self.exp_avg = [torch.zeros_like(p) for p in self.params]  # first moments
        self.exp_avg_sq = [torch.zeros_like(p) for p in self.params]  # second moments

    def zero_grad(self):
        for param in self.params:
            param.grad = None

    def state_dict(self):
        """A copy of the running state: the step count and both moments."""
        return {
            "steps": self.steps,
            "exp_avg": [t.clone() for t in self.exp_avg],
            "exp_avg_sq": [t.clone() for t in self.exp_avg_sq],
        }

    def load_state_dict(self, state):
        """Put a ``state_dict`` back, in place."""
        self.steps = state["steps"]
        for mine, theirs in zip(self.exp_avg, state["exp_avg"], strict=True):
            mine.copy_(theirs)
        for mine, theirs in zip(self.exp_avg_sq, state["exp_avg_sq"], strict=True):
            mine.copy_(theirs)

    @torch.no_grad()
    def step(self):
        self.steps += 1
        bias_correction1 = 1 - self.beta1**self.steps
        bias_correction2_sqrt = (1 - self.beta2**self.steps) ** 0.5
        step_size = self.lr / bias_correction1
        moments = zip(self.params, self.exp_avg, self.exp_avg_sq, strict=True)
        for param, exp_avg, exp_avg_sq in moments:
            if param.grad is None:
                continue
            grad = param.grad
            exp_avg.lerp_(grad, 1 - self.beta1)
            exp_avg_sq.mul_(self.beta2).addcmul_(grad, grad, value=1 - self.beta2)
            denom = (exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(self.eps)
            param.addcdiv_(exp_avg, denom, value=-step_size)


@contextlib.contextmanager
def one_thread():
    """Run the block on one thread, then restore the thread count."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


class NotebookLine:
    """A file for tqdm that draws the bar in one notebook output.

    The output first shows ``label``; tqdm's updates replace it in place, and
    ``close`` puts ``label`` back, so the stored output is the same on every
    run however fast the training went.
    """

    def __init__(self, label):
        from IPython.display import display

        self.label = {"text/plain": label}
        self.handle = display(self.label, raw=True, display_id=True)

    def write(self, text):
        text = text.strip("\r\n")
        if text:
            self.handle.update({"text/plain": text}, raw=True)

    def flush(self):
        """Nothing to flush: every write is sent at once."""

    def close(self):
        self.handle.update(self.label, raw=True)


def in_notebook():
    """Whether the code runs in a Jupyter kernel (not a terminal or a test)."""
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and type(shell).__name__ == "ZMQInteractiveShell"


class _Silent:
    """A bar that counts nothing: the quiet mode."""

    def update(self, n=1):
        """Nothing to show."""


@contextlib.contextmanager
def progress_bar(steps, label, progress):
    """A tqdm bar for ``steps`` steps, in the notebook or on stderr."""
    if not progress:
        yield _Silent()
        return
    line = NotebookLine(label) if in_notebook() else None
    # A notebook shows Unicode blocks; a terminal's encoding decides for itself.
    use_ascii = None if line is None else False
    bar = tqdm(total=steps, desc=label, file=line, ncols=72, mininterval=0.1, ascii=use_ascii)
    try:
        yield bar
    finally:
        bar.close()
        if line is not None:
            line.close()
