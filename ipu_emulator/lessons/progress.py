"""A progress line for the notebooks' training loops that is stored finished.

A progress-bar widget (``tqdm.auto``) is saved in a notebook as its first frame ("0%| 0/125"),
so a learner opening the stored notebook sees a half-drawn bar.  ``progress`` shows one line
of text and rewrites it in place (``update_display``), so the line a notebook stores is the
last one drawn: ``epoch 3/3: 125/125 steps in 1.4 s``.  Outside IPython it prints that line
once, at the end.

    >>> total = 0
    >>> for step in progress(range(3), "demo"):
    ...     total += step
    demo: 3/3 in 0.0 s
"""
from __future__ import annotations

import time
from typing import Iterable, Iterator, Optional, TypeVar

Item = TypeVar("Item")

# Redrawing more often than this only costs the kernel time.
REDRAW_SECONDS = 0.25


def _display_handle(text: str):
    """A display that ``update`` rewrites, or None outside an IPython kernel."""
    try:
        from IPython import get_ipython
        from IPython.display import display
    except ImportError:
        return None
    shell = get_ipython()
    if shell is None or not hasattr(shell, "kernel"):
        return None
    return display({"text/plain": text}, raw=True, display_id=True)


def progress(items: Iterable[Item], description: str,
             total: Optional[int] = None) -> Iterator[Item]:
    """Yield ``items``, showing ``description: done/total`` and, at the end, the time taken."""
    total = total if total is not None else (len(items) if hasattr(items, "__len__") else None)
    of_total = f"/{total}" if total is not None else ""
    handle = _display_handle(f"{description}: 0{of_total}")
    start = last_drawn = time.perf_counter()   # after importing IPython: time the items only
    done = 0
    for item in items:
        yield item
        done += 1
        now = time.perf_counter()
        if handle is not None and now - last_drawn >= REDRAW_SECONDS:
            handle.update({"text/plain": f"{description}: {done}{of_total}"}, raw=True)
            last_drawn = now
    finished = f"{description}: {done}{of_total} in {time.perf_counter() - start:.1f} s"
    if handle is None:
        print(finished)
    else:
        handle.update({"text/plain": finished}, raw=True)


__all__ = ["progress"]
