"""Bring the package code the chapters show in markdown up to date with ``chapters/mha``.

Usage: python .ci/sync_excerpts.py NOTEBOOK...     (``make excerpts``, then ``make execute``)

A chapter shows a class of ``mha`` in a fenced ```` ```python ```` block of a markdown cell, as a
verbatim excerpt (``tests/test_notebooks.py`` checks that it is one). After the class changes,
this replaces each such block with the class's current source, keeping the methods the block
showed (from the ``class`` line to the end of the last of them) and leaving the prose around it
alone. Blocks of several classes are separated by two blank lines, as in the package.
"""

import ast
import inspect
import re
import sys
import textwrap

import nbformat

import mha
import mha.variants

FENCE = re.compile(r"```python\n(.*?)```", re.S)


def current_excerpt(shown):
    """The package's source of the class in ``shown``, cut after the last method ``shown`` has."""
    (old,) = [n for n in ast.parse(textwrap.dedent(shown)).body if isinstance(n, ast.ClassDef)]
    methods = {n.name for n in old.body if isinstance(n, ast.FunctionDef)}
    source = inspect.getsource(getattr(mha.variants, old.name, None) or getattr(mha, old.name))
    (new,) = ast.parse(source).body
    last = max(n.end_lineno for n in new.body if getattr(n, "name", None) in methods)
    return "\n".join(source.splitlines()[:last]) + "\n"


def synced(block):
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
