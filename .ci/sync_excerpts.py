"""Bring the package code the chapters show in markdown up to date with ``chapters/mha``.

Usage: python .ci/sync_excerpts.py NOTEBOOK...     (``make excerpts``, then ``make execute``)

A chapter shows a class of ``mha`` in a fenced ```` ```python ```` block of a markdown cell, as a
verbatim excerpt (``tests/test_notebooks.py`` checks that it is one). After the class changes,
this replaces each such block with the class's current source, keeping the methods the block
showed (from the ``class`` line to the end of the last of them) and leaving the prose around it
alone. Blocks of several classes are separated by two blank lines, as in the package.
"""

import ast
import difflib
import importlib
import inspect
import pkgutil
import re
import sys
import textwrap

import nbformat

import mha

FENCE = re.compile(r"```python\n(.*?)```", re.S)


def package_classes():
    """Every class defined in a top-level module of ``mha`` (what the excerpt test reads)."""
    for info in pkgutil.iter_modules(mha.__path__, "mha."):
        module = importlib.import_module(info.name)
        for _, found in inspect.getmembers(module, inspect.isclass):
            if found.__module__ == info.name:
                yield found


def package_class(name):
    """The class called ``name`` in whichever module of ``mha`` defines it."""
    for found in package_classes():
        if found.__name__ == name:
            return found
    raise LookupError(f"no module of mha defines a class {name}")


def package_functions():
    """Every function of ``mha``'s top-level modules, and every method of their classes."""
    for info in pkgutil.iter_modules(mha.__path__, "mha."):
        module = importlib.import_module(info.name)
        for _, found in inspect.getmembers(module, inspect.isfunction):
            if found.__module__ == info.name:
                yield found
    for cls in package_classes():
        yield from (f for f in vars(cls).values() if inspect.isfunction(f))


def current_function(shown):
    """The package's source of the function or method in ``shown`` (a ``def`` without its class).

    Several classes define a method of that name (``forward``): the one whose source reads most
    like what the chapter showed is the one it showed.
    """
    name = re.match(r"\s*def (\w+)", shown).group(1)
    candidates = [
        textwrap.dedent(inspect.getsource(f)) for f in package_functions() if f.__name__ == name
    ]
    if not candidates:
        raise LookupError(f"no module of mha defines a function or method {name}")
    return max(candidates, key=lambda s: difflib.SequenceMatcher(None, s, shown).ratio())


def current_excerpt(shown):
    """The package's source of the class in ``shown``, cut after the last method ``shown`` has."""
    (old,) = [n for n in ast.parse(textwrap.dedent(shown)).body if isinstance(n, ast.ClassDef)]
    methods = {n.name for n in old.body if isinstance(n, ast.FunctionDef)}
    source = inspect.getsource(package_class(old.name))
    (new,) = ast.parse(source).body
    last = max(n.end_lineno for n in new.body if getattr(n, "name", None) in methods)
    return "\n".join(source.splitlines()[:last]) + "\n"


def synced(block):
    if re.match(r"def ", block.lstrip("\n")):
        methods = re.split(r"\n\n(?=def )", textwrap.dedent(block).strip("\n"))
        return "\n".join(current_function(shown) for shown in methods)
    if not re.search(r"^class ", block, re.M):
        return block
    classes = re.split(r"\n\n\n(?=class )", block.strip("\n"))
    return "\n\n".join(current_excerpt(shown) for shown in classes)


def main(paths):
    for path in paths:
        notebook = nbformat.read(path, as_version=4)
        for cell in notebook.cells:
            if cell.cell_type == "markdown":
                cell.source = FENCE.sub(
                    lambda m: f"```python\n{synced(m.group(1))}```", cell.source
                )
        nbformat.write(notebook, path)


if __name__ == "__main__":
    main(sys.argv[1:])
