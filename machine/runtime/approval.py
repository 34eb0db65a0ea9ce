"""An approval seam whose answers arrive later: the original's approval service, ready to mount.

``registry.set_approval(service)`` and the registry asks it for every ``Ask`` of a call with an
agent.  Each question waits until someone answers it with :meth:`ApprovalService.answer` (a UI, a
human, a test) -- or until the request's signal aborts, whichever comes first:

* an answer resolves the question with that answer;
* an abort of the request's signal (or of the call's own signal, which task cancellation aborts
  even for a call without a caller signal) answers ``CANCELLED`` at once, as the original
  service does; a signal already aborted when the question is asked answers ``CANCELLED``
  without waiting;
* an answer that comes after the question was resolved (a late click) is ignored:
  :meth:`~ApprovalService.answer` returns ``False`` and the audit log says so.

The registry awaits the seam and never races it (R24, D12); this service is what makes that wait
end promptly on cancellation.  Every step is recorded in :attr:`ApprovalService.audit` (the
original's service keeps an asked/cancelled audit pair for a cancelled question, D1).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from .eventloop import Waiter
from .registry import Approval, ApprovalRequest
from .signals import AbortSignal

__all__ = ["ApprovalService", "AuditEntry"]


@dataclass(frozen=True, slots=True)
class AuditEntry:
    """One step of a question: ``asked``, an answer's value, or ``ignored`` (a late answer)."""

    call_id: str
    what: str
    detail: str = ""


@dataclass(eq=False)
class _Question:
    request: ApprovalRequest
    future: Waiter
    signals: tuple[AbortSignal, ...] = field(default=())


class ApprovalService:
    """An approval seam answered from outside (see the module doc).

    ``on_request``, if given, is called synchronously with each request as it is asked (to show
    it in a UI, or to answer it at once).
    """

    def __init__(self, *, on_request: Callable[[ApprovalRequest], None] | None = None) -> None:
        self._questions: list[_Question] = []
        self._on_request = on_request
        self.audit: list[AuditEntry] = []

    async def __call__(self, request: ApprovalRequest) -> Approval:
        self.audit.append(AuditEntry(request.call_id, "asked", request.reason or ""))
        watched: list[AbortSignal] = []
        for s in (request.signal, request.call_signal):
            if s is not None and all(s is not t for t in watched):
                watched.append(s)
        signals = tuple(watched)
        future = Waiter()
        question = _Question(request, future, signals)
        if any(s.aborted for s in signals):
            self._resolve(question, Approval.CANCELLED, "the signal was already aborted")
            answer: Approval = future.result()
            return answer

        def on_abort(_: AbortSignal) -> None:
            self._resolve(question, Approval.CANCELLED, "the signal aborted")

        for s in signals:
            s.add_listener(on_abort)
        self._questions.append(question)
        try:
            if self._on_request is not None:
                self._on_request(request)
            answer = await future
            return answer
        finally:
            for s in signals:
                s.remove_listener(on_abort)
            if question in self._questions:
                self._questions.remove(question)

    def pending(self) -> tuple[ApprovalRequest, ...]:
        """The questions waiting for an answer, oldest first."""
        return tuple(q.request for q in self._questions if not q.future.done())

    def answer(self, call_id: str, answer: Approval | bool) -> bool:
        """Answer the oldest open question of ``call_id`` (``True``/``False`` mean approved and
        rejected).  Returns whether a question took it; a late answer is ignored and audited."""
        value = answer if isinstance(answer, Approval) else (
            Approval.APPROVED if answer else Approval.REJECTED
        )
        for q in self._questions:
            if q.request.call_id == call_id and not q.future.done():
                self._resolve(q, value)
                return True
        self.audit.append(AuditEntry(call_id, "ignored", f"late answer {value.value}"))
        return False

    def close(self, answer: Approval = Approval.UNAVAILABLE) -> int:
        """Answer every open question with ``answer`` (default ``UNAVAILABLE``: the service is
        going away); returns how many there were."""
        open_questions = [q for q in self._questions if not q.future.done()]
        for q in open_questions:
            self._resolve(q, answer, "the service closed")
        return len(open_questions)

    def _resolve(self, question: _Question, answer: Approval, detail: str = "") -> None:
        if question.future.done():
            return
        question.future.set(answer)
        self.audit.append(AuditEntry(question.request.call_id, answer.value, detail))
