"""Re-execute chapters in place, top to bottom in one kernel, and normalise their metadata.

Usage: python .ci/execute_chapters.py chapters/01_*.ipynb ...

Each notebook runs in its own folder (as Binder and nbval run it). Afterwards the notebook keeps
only stable metadata: the standard ``python3`` kernelspec, no per-cell timing, no widget state,
so re-running produces small diffs.
"""

import sys
from pathlib import Path

import nbformat
from nbclient import NotebookClient

KERNELSPEC = {"display_name": "Python 3", "language": "python", "name": "python3"}
VOLATILE_CELL_METADATA = ("execution", "ExecuteTime", "collapsed", "scrolled")


def normalise(nb):
    nb.metadata = {
        "kernelspec": KERNELSPEC,
        "language_info": {"name": "python", "pygments_lexer": "ipython3"},
    }
    for cell in nb.cells:
        for key in VOLATILE_CELL_METADATA:
            cell.metadata.pop(key, None)
    return nb


def execute(path):
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, timeout=600, kernel_name="python3",
                            resources={"metadata": {"path": str(path.parent)}})
    client.execute()
    nbformat.write(normalise(nb), path)
    print(f"executed {path}")


if __name__ == "__main__":
    for arg in sys.argv[1:]:
        execute(Path(arg))
