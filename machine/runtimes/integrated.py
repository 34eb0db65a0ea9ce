"""An integrated row: a runtime's plain row with a toolcancel integration put in.

A plain row that can take an integration has one method where it does (``integration(call,
*args)``): what stands, for one vector, at the runtime's integration point -- with no
integration, the runtime's own (``None``, the node's own wrapper, an object doing what the
runtime does alone).  :func:`integrated` builds the integrated row from that plain row and the
integration's install step, so everything else -- the mapping, the stages it drives, its
refusals, its control -- is the plain row's, and a change to the plain row is a change to its
integrated row.  An integrated row's file holds the install step, whose lines that put the
integration in end with ``# integration``: deleted, ``install`` hands the plain value back and
the row is its plain row again (tests/test_integrations.py plants that stub).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any, TypeVar

from .call import Call, Execute
from .driver import Runtime

R = TypeVar("R", bound=Runtime)

Install = Callable[..., Any]
"""``install(call, plain, *args)``: what stands at the integration point for ``call`` instead
of ``plain`` (the plain row's value; ``args`` are what the plain row hands its point)."""


def integrated(
    base: type[R],
    install: Install,
    module: str,
    *,
    settled: Callable[[Any], Awaitable[Any]] | None = None,
) -> type[R]:
    """``base``'s integrated row: its integration point holds what ``install`` makes, its
    ``implementation`` says ``+ module`` (the integration's module).

    ``settled``: for a runtime that raises its caller's cancellation without an answer (a run
    that ends at once), how the integration hands over the call's published result
    (``settled(installed)``); the row then answers its caller's cancellation with it
    (:meth:`~toolcancel.runtimes.Call.answered`), and so does its control
    (:attr:`~toolcancel.runtimes.Runtime.answered`).  Where ``install`` handed the plain value
    back (a stub), nothing is answered: the row is its plain row."""
    if not callable(getattr(base, "integration", None)):
        raise AttributeError(
            f"{base.__name__} has no integration(call) method: a plain row says where an "
            "integration goes before a row can put one there"
        )

    class Integrated(base):  # type: ignore[valid-type,misc]
        implementation = f"{base.implementation} + {module}"
        answered = settled is not None
        _installed: Any = None
        """What ``install`` put in for the vector being played (serve plays one at a time),
        None where it handed the plain value back."""

        def integration(self, call: Call, *args: Any) -> Any:
            plain = super().integration(call, *args)
            made = install(call, plain, *args)
            self._installed = None if made is plain else made
            return made

        @asynccontextmanager
        async def open(self, call: Call) -> AsyncIterator[Execute]:
            self._installed = None
            async with super().open(call) as execute:
                installed = self._installed
                if settled is None or installed is None:
                    yield execute
                else:
                    yield call.answered(execute, lambda: settled(installed))

    Integrated.__name__ = Integrated.__qualname__ = f"{base.__name__}Integrated"
    Integrated.__module__ = install.__module__
    return Integrated
