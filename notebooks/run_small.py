"""Run a teaching notebook as a user would, at small size: replace the cell tagged ``parameters`` and execute every
cell in an IPython kernel (nbclient). Used by the tests and by the documentation build (``docs/conf.py``), which
renders the executed copies; the notebooks themselves are stored without outputs."""

from __future__ import annotations

import os
from pathlib import Path


def execute_small(path: Path, cwd: Path, *, show_solution: bool, extra_cells=(), timeout: int = 600):
    """The notebook at ``path`` executed with ``SMALL = True`` in working directory ``cwd``, with ``extra_cells``
    (code) appended; returns nbformat's node.

    A cell that raises stops the run with nbclient's ``CellExecutionError``, which names the cell.
    """
    import nbformat
    from nbclient import NotebookClient

    book = nbformat.read(path, as_version=4)
    for cell in book.cells:
        if "parameters" in cell.metadata.get("tags", []):
            cell.source = f"SMALL = True\nSHOW_SOLUTION = {show_solution}"
    book.cells += [nbformat.v4.new_code_cell(source) for source in extra_cells]
    client = NotebookClient(book, timeout=timeout, kernel_name="python3", resources={"metadata": {"path": str(cwd)}})
    # the kernel draws inline as a user's does, not with a non-interactive backend a caller may have set
    client.execute(env={k: v for k, v in os.environ.items() if k != "MPLBACKEND"})
    return book
