"""The names chapter 1's runner (``wrapper_trial``) and chapter 3's ``split_trial`` import from
here: chapter 2's evidence serves them. Remove this module once they import from
:mod:`.wrapper_args`, :mod:`.head_faults` and :mod:`.arguments` directly."""

from .arguments import JOINS as JOINS
from .head_faults import attempt as attempt
from .head_faults import is_head as is_head
from .wrapper_args import Attempt


class HeadsRun(Attempt):
    """``module`` called once on ``x`` at once, so that the heads' forwards a caller counts next
    are this run's: its output, what each head was given (``calls`` per head, in ``order``)."""

    def __init__(self, module, x):
        super().__init__(module, None, x)
        _, self.received, self.order = self.run

    calls = property(lambda run: [len(inputs) for inputs in run.received])
