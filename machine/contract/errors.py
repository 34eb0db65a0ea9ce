"""One error hierarchy for everything toolcancel raises on its own behalf.

Failures of *tools and hooks* are never raised out of ``execute()``: they become results (the
contract says which).  What is raised here is misuse of the library, a broken contract file, or an
event sequence the contract does not allow.
"""

from __future__ import annotations


class ToolcancelError(Exception):
    """Base class of every error toolcancel raises itself."""


class ContractError(ToolcancelError):
    """The contract file is malformed or inconsistent (names the file and the entry)."""


class ContractViolation(ToolcancelError):
    """An event arrived that no transition of the contract allows in the call's state.

    In the registry this is a bug in the driver; in the trace checker it is the verdict.
    """

    def __init__(self, state: str, event: str, allowed: tuple[str, ...]) -> None:
        self.state = state
        self.event = event
        self.allowed = allowed
        listed = ", ".join(allowed) or "nothing"
        super().__init__(
            f"event {event!r} is not allowed in state {state!r} (allowed there: {listed})"
        )


class RegistryUsageError(ToolcancelError):
    """The registry or a call's execution view was used in a way the contract forbids.

    The message says what to do instead.
    """


class NotSerializable(ToolcancelError):
    """A value is not losslessly JSON-serializable; ``path`` says where inside it."""

    def __init__(self, path: str, why: str) -> None:
        self.path = path
        self.why = why
        super().__init__(f"{path}: {why}")


class ToolError(Exception):
    """A structured tool failure: the result carries ``error`` with this class's name and code.

    Subclass it to give failures their own names; the name in the result is the class name.
    """

    def __init__(self, message: str, *, code: str) -> None:
        super().__init__(message)
        self.code = code


class TaskCancelled(ToolcancelError, ToolError):
    """The reason a call's signal aborts with when the asyncio task awaiting ``execute()`` is
    cancelled (``task.cancel()``, a failing ``TaskGroup`` sibling, ``asyncio.timeout``).

    ``message`` is the cancellation's own message, if it had one.  The call is then cancelled
    cooperatively like any caller abort: CONTRACT.md, "Python binding".  A body that raises it
    (``signal.throw_if_aborted()`` raises the reason itself) publishes an error with the code
    ``ABORTED``; its text does not name the call (``call_id`` does).
    """

    def __init__(self, call_id: str, message: object = None) -> None:
        self.call_id = call_id
        self.message = message
        said = "" if message is None else f" ({message})"
        ToolError.__init__(self, f"the task awaiting the tool call was cancelled{said}",
                           code="ABORTED")


class InvalidBudget(ValueError, TypeError):
    """A declared ``timeout_ms`` that is not a positive finite number (R32).

    A ``ValueError`` as Python wants for a bad value of the right type, and a ``TypeError`` as
    R32 says; the message is R32's with the Python name (``timeout_ms`` for ``timeoutMs``).
    """
