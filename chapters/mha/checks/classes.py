"""Exercises whose answer is a class: what to say when it is not one, and shortcuts seen through.

Chapters 1 and 3 give the reader a *skeleton*: a base class with the constructor and a
``forward`` that raises ``NotImplementedError``. The reader subclasses it and writes ``forward``.
Such a practice must not pass without the skill, so the checks here recognise

* something that is not a module class at all (``None``, an instance, a function);
* the skeleton untouched, or subclassed with nothing written (its placeholder still raises);
* a class whose ``forward`` *is* one of the book's own, or only hands the work to one
  (``super().forward(x)`` in a subclass of a book class, a saved reference to a book
  ``forward``, or a book module built inside).

"The book's own" is any module of the ``mha`` package except the checker itself, read from
the code that runs rather than from a list: a module a chapter adds later counts from the day
it is added, even one first imported inside the reader's forward.

torch's own attention does the work most practices teach, so the checks share one detector of
it too: :func:`watching_torch_attention` sees ``F.scaled_dot_product_attention`` (with or
without ``enable_gqa``) and ``nn.MultiheadAttention`` by any route, and
:func:`torch_attention_message` says what that code does and points to chapter 5, whose
practice is the fused kernel.
"""

import contextlib
import dis
import inspect
import sys

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

from ..counting import QuietDispatchMode
from .class_answer import Skeleton as Skeleton  # where it lived before class_answer
from .core import Mistake, kind_of

#: The book's package ("mha"): a forward of any of its modules, loaded now or added later, is
#: the book's work, not the reader's.
PACKAGE = __package__.rpartition(".")[0]
#: The checker inside it ("mha.checks"): its skeletons and the solutions it shows are the
#: reader's to use, so they do not count as the book's work.
CHECKER = __package__


def _in_package(name):
    """Whether the module called ``name`` is in the package (the book's or its checker)."""
    return isinstance(name, str) and (name == PACKAGE or name.startswith(PACKAGE + "."))


def is_book_module(name):
    """Whether the module called ``name`` is one of the book's (in ``mha``, not its checker)."""
    checker = isinstance(name, str) and (name == CHECKER or name.startswith(CHECKER + "."))
    return _in_package(name) and not checker


def computes(function):
    """Whether ``function`` can return a value: a placeholder ``forward`` only raises."""
    code = getattr(function, "__code__", function)
    return any(step.opname.startswith("RETURN") for step in dis.get_instructions(code))


def _owner(function):
    """The class that defines ``function`` (from its qualified name), else ``function``."""
    owner = sys.modules.get(function.__module__)
    for part in function.__qualname__.split(".")[:-1]:
        owner = getattr(owner, part, None)
    return owner if isinstance(owner, type) else function


def book_classes():
    """Every module class of the book's modules loaded so far whose own ``forward`` computes
    (a module the reader never imported cannot be used, so the loaded ones are enough)."""
    found = []
    for name, module in list(sys.modules.items()):
        if module is None or not is_book_module(name):
            continue
        for value in list(vars(module).values()):
            is_module = isinstance(value, type) and issubclass(value, torch.nn.Module)
            forward = vars(value).get("forward") if is_module else None
            if inspect.isfunction(forward) and value.__module__ == name and computes(forward):
                found.append(value)
    return found


def book_forward_of(cls, allowed=()):
    """The book class whose very ``forward`` function ``cls`` uses (or the book function it
    uses as its forward), or ``None``. Any module of the book counts, whenever it was added;
    the ``forward`` of a class in ``allowed`` does not."""
    forward = getattr(cls, "forward", None)
    forward = getattr(forward, "__func__", forward)
    if not inspect.isfunction(forward) or not is_book_module(forward.__module__):
        return None
    if not computes(forward) or any(vars(a).get("forward") is forward for a in allowed):
        return None
    return _owner(forward)


@contextlib.contextmanager
def _watching(describe):
    """Record the names of the book's code that runs while the block runs, in the yielded list.

    ``describe(code, module)`` says what a code object running in the module called ``module``
    is: ``None`` (not the book's work), ``(name, False)`` (the book's work, whoever calls it)
    or ``(name, True)`` (the book's work when the reader's code calls it directly).

    A profiler sees every call, whatever route it took: directly, through ``super()``, through
    a reference saved beforehand, or through a module built inside the block.
    """
    called, seen = [], {}

    def profile(frame, event, arg):
        if event != "call":
            return
        code = frame.f_code
        if code not in seen:
            seen[code] = describe(code, frame.f_globals.get("__name__"))
        if seen[code] is None:
            return
        name, only_from_outside = seen[code]
        caller = frame.f_back
        if not only_from_outside or (
            caller is not None and not _in_package(caller.f_globals.get("__name__"))
        ):
            called.append(name)

    previous = sys.getprofile()
    sys.setprofile(profile)
    try:
        yield called
    finally:
        sys.setprofile(previous)


def _book_code(code, module, allowed_code=frozenset()):
    """What the book computes in ``code``, run in ``module``, for :func:`_watching`.

    The ``forward`` of a book class counts whoever calls it: any module of the book, loaded
    before or during the watch (not placeholders that only raise, not ``allowed_code``). A
    function of the checker (its answer key: ``split_attention`` ...) counts when the
    reader's code calls it; the checker calls it too, to compute what it expects.
    """
    if code.co_name == "forward":
        if code in allowed_code or not is_book_module(module) or not computes(code):
            return None
        return code.co_qualname.rpartition("<locals>.")[2], False
    if code.co_flags & (inspect.CO_GENERATOR | inspect.CO_COROUTINE):
        return None  # resumed by whoever iterates it (contextlib, for a context manager)
    checker = _in_package(module) and not is_book_module(module)
    if checker and "." not in code.co_qualname and code.co_name[:1] not in "_<":
        return f"{code.co_name}()", True
    return None


def watching_calls(code):
    """Record the name of every function of ``code`` (``{code object: name}``) that runs, and
    of the book's other work (see :func:`watching_book_forwards`; a forward is named
    ``"Class.forward"``): a check that lists the book code it refuses need not list a module
    added later."""

    def describe(running, module):
        name = code.get(running)
        return (name, False) if name is not None else _book_code(running, module)

    return _watching(describe)


def watching_book_forwards(allowed=()):
    """Record the book's work that runs: the class name of every book ``forward`` (see
    :func:`book_forward_of`; any module of the book, loaded before the block or inside it,
    except classes in ``allowed``), and ``"name()"`` for a function of the checker that the
    reader's code calls."""
    allowed_code = {vars(a)["forward"].__code__ for a in allowed if "forward" in vars(a)}

    def describe(code, module):
        found = _book_code(code, module, allowed_code)
        return found and (found[0].removesuffix(".forward"), found[1])

    return _watching(describe)


#: torch's own attention, seen as the Python functions a forward calls: the fused kernel, and
#: the functions behind ``torch.nn.MultiheadAttention`` (its slow path and its fast path).
_KERNEL_FUNCTIONS = (F.scaled_dot_product_attention,)
_LAYER_FUNCTIONS = (F.multi_head_attention_forward, torch._native_multi_head_attention)
#: ... and as the ATen operators they dispatch, whatever route reached them (``torch.ops``).
_KERNEL_OPS = ("_scaled_dot_product",)  # prefixes: the flash, efficient, math ... variants
_LAYER_OPS = ("_native_multi_head_attention", "_transformer_encoder_layer_fwd")


class TorchAttentionSeen:
    """What of torch's own attention a block of code ran: the record
    :func:`watching_torch_attention` yields.

    ``layer``: ``torch.nn.MultiheadAttention`` (or ``F.multi_head_attention_forward``, the
    function behind it); ``kernel``: ``F.scaled_dot_product_attention`` (or one of its ATen
    operators); ``grouped``: the kernel was asked to share keys and values among heads itself
    (``enable_gqa=True``).
    """

    def __init__(self):
        self.layer = self.kernel = self.grouped = False

    def __bool__(self):
        return self.layer or self.kernel


class _AttentionFunctions(TorchFunctionMode):
    """Marks the calls of torch's attention functions in a :class:`TorchAttentionSeen`."""

    def __init__(self, seen):
        super().__init__()
        self.seen = seen

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in _KERNEL_FUNCTIONS:
            self.seen.kernel = True
            self.seen.grouped |= bool(kwargs.get("enable_gqa", False))
        elif func in _LAYER_FUNCTIONS:
            self.seen.layer = True
        return func(*args, **kwargs)


class _AttentionOps(QuietDispatchMode):
    """Marks the ATen operators of torch's attention in a :class:`TorchAttentionSeen`."""

    def __init__(self, seen):
        super().__init__()
        self.seen = seen

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func.overloadpacket.__name__
        if name.startswith(_KERNEL_OPS):
            self.seen.kernel = True
        elif name.startswith(_LAYER_OPS):
            self.seen.layer = True
        return func(*args, **(kwargs or {}))


@contextlib.contextmanager
def watching_torch_attention():
    """Record whether the block runs torch's own attention (:class:`TorchAttentionSeen`).

    The one detector every check uses for what torch computes in one call: the scores, the
    mask, the scaled softmax, dropout and the mix of values. It watches both the Python
    functions (``F.scaled_dot_product_attention``, ``F.multi_head_attention_forward``, under
    ``nn.MultiheadAttention``) and the ATen operators they reach (``_scaled_dot_product_*``,
    ``_native_multi_head_attention``), so an alias, ``torch.ops.aten`` or the layer's fast
    path is seen too. (While a function mode is active, ``nn.MultiheadAttention`` takes its
    Python path, which computes the same output.)
    """
    seen = TorchAttentionSeen()
    with _AttentionFunctions(seen), _AttentionOps(seen):
        yield seen


def torch_attention_message(seen, here):
    """What to say when a forward hands attention to torch's own (``seen``): what that code
    does, where the book uses it (chapter 5), and what to write ``here`` instead."""
    if seen.layer:
        what = (
            "Your forward runs torch.nn.MultiheadAttention (or "
            "torch.nn.functional.multi_head_attention_forward, the function behind it), "
            "PyTorch's own attention layer: inside, it computes the scores, the mask, the "
            "scaled softmax, dropout and the mix of values, with the fused kernel when it can"
        )
    else:
        what = (
            "Your forward calls torch.nn.functional.scaled_dot_product_attention, PyTorch's "
            "fused kernel: inside, it computes the scores, the causal mask, the scaled softmax, "
            "dropout and the mix of values"
        )
        if seen.grouped:
            what += (
                ", and with enable_gqa=True it also gives each group's keys and values to "
                "the heads of that group"
            )
    return (
        f"{what}. So the steps this practice asks you to write are not yours. Chapter 5's "
        f"practice hands attention to that kernel and measures what it buys. Here, {here}"
    )


def class_answer_mistakes(check, example, start=None, book=(), method="forward", first=""):
    """The mistakes of an answer that should be a module class, for the check named ``check``.

    ``example`` is the name of the class the chapter asks for, as the messages quote it. With
    a starting class ``start``, whose ``method`` the reader writes, the answer must also
    subclass it, not be (or subclass) one of the classes ``book()`` lists, nor take a book
    ``forward``, and have a ``method`` of its own (``first`` is the question to ask then).
    """
    module = "Start its definition from the skeleton the chapter gives, so that it holds "
    module += "layers and can be called on a tensor."
    if start is not None:
        module = f"Start it with class {{name}}({start.__name__}):, so that it has the layers."
    mistakes = (
        Mistake(
            "nothing passed",
            f"{check} got None. Run the cell that defines your class, then pass the class "
            f"itself: {check}({example}).",
            lambda answer: answer is None,
        ),
        Mistake(
            "an instance instead of the class",
            f"You passed an instance of {{name}}, not the class. Pass the class itself, "
            f"{check}({{name}}): the check builds its own instances, with several sizes.",
            lambda answer: isinstance(answer, torch.nn.Module),
        ),
        Mistake(
            "not a class",
            f"{check} expects a class, but got {{kind}}. Pass the class you defined with "
            "class ...: by its name, without calling it.",
            lambda answer: not isinstance(answer, type),
        ),
        Mistake(
            "not an nn.Module",
            f"{{name}} is a class, but not an nn.Module. {module}",
            lambda answer: not issubclass(answer, torch.nn.Module),
        ),
    )
    if start is None:
        return mistakes
    write = f"subclass {start.__name__} and write {method}."
    return (
        *mistakes,
        Mistake(
            "the book's module",
            f"{{name}} is one of the book's own modules, or built on one. This exercise asks "
            f"for your own {method}: {write}",
            lambda answer: issubclass(answer, book() if callable(book) else book),
        ),
        Mistake(
            "not from the starting point",
            f"{{name}} does not start from {start.__name__}, so the check cannot know its "
            f"layers: {write}",
            lambda answer: not issubclass(answer, start),
        ),
        Mistake(
            "a book forward assigned",
            f"{{name}}.forward is the book's own forward, taken from another class. This "
            f"exercise asks for your own: {write}",
            lambda answer: book_forward_of(answer) is not None,
        ),
        Mistake(
            "the starting code",
            f"{{name}} has no {method} of its own yet: the starting code's only raises. {first}",
            lambda answer: getattr(answer, method) is getattr(start, method),
        ),
    )


class AnswerFacts:
    """The facts the not-a-class messages quote about an answer."""

    def __init__(self, answer):
        self.answer = answer

    @property
    def name(self):
        answer = self.answer
        return answer.__name__ if isinstance(answer, type) else type(answer).__name__

    @property
    def kind(self):
        return kind_of(self.answer)
