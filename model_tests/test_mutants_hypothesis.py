"""The stateful test must kill every deliberately broken registry.

A property test that passes against a correct registry proves something only if it fails against
a wrong one.  Each mutant of :mod:`toolcancel.selfcheck.mutants` breaks exactly one guarantee; here
the same :class:`~model_tests.test_stateful.ContractMachine`, with the same (``ci``) settings, runs
against each of them and must find a falsifying example.  The failure has to be one of the
machine's own contract assertions (its message starts with the rule id it cites), not a crash of
the test, so a kill means a rule was seen broken.  The rule each kill cites is printed (run with
``-s``).

The ci settings are used as they are, except that the search stops at the first failure and does
not shrink it: the question here is only whether a falsifying run exists, and shrinking a long
stateful run costs minutes per mutant without changing the answer.

Under the ``ci`` profile the mutants whose search is long (:data:`LONG_SEARCHES`) are left to the
``thorough`` profile: each is killed in CI first by ``verify --mutants`` (stopping at its first
violation, tests/test_verify_cli.py), and the searches kept still show the stateful test failing.
"""

from __future__ import annotations

import gc
import logging
import os
import re

import pytest
from hypothesis import Phase, settings
from hypothesis.stateful import run_state_machine_as_test
from toolcancel.contract.loader import load_contract
from toolcancel.selfcheck.mutants import MUTANTS, Mutant

from model_tests.test_stateful import ContractMachine

_CITED = re.compile(r"^(R\d+): ")


def kill_settings() -> settings:
    """The loaded profile, stopping at the first failure, without shrinking it."""
    return settings(
        phases=[Phase.explicit, Phase.reuse, Phase.generate],
        report_multiple_bugs=False,
        print_blob=False,
    )


def _failures(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for sub in exc.exceptions for leaf in _failures(sub)]
    return [exc]


def _cited_rules(exc: BaseException) -> list[str]:
    """The rule ids the falsifying examples' assertions cite (a crash cites none)."""
    rules = []
    for failure in _failures(exc):
        match = _CITED.match(str(failure)) if isinstance(failure, AssertionError) else None
        if match is None:
            raise AssertionError(
                f"the mutant made the test crash instead of breaking a rule: {failure!r}"
            ) from exc
        rules.append(match.group(1))
    return rules


def _default_retry(mutant: Mutant) -> bool:
    """Whether the mutant breaks something under the registry's default retry behaviour (D11),
    the one the stateful machine's registries run (``cursor_skips_last`` breaks only ``cursor``:
    verify's deeper family and the cursor vectors kill it)."""
    return mutant.retry in (None, load_contract().default_retry)


LONG_SEARCHES = {
    # mutant: process CPU seconds the ci profile's derandomized search spends before its first
    # falsifying run (2026-12-02, 3.11, pure registry).  The nine came to 133 s of the 137 s the
    # seventeen searches took; the eight kept take under 1.5 s each (R13, R21, R22, R27, R30,
    # R31).  verify --mutants kills every one in CI, citing the rule each declares.
    "no_recheck_before_body": 19.9,
    "loses_contexts_on_abort": 19.8,
    "classifies_timeout_by_code": 19.7,
    "post_sees_late_success": 19.7,
    "keeps_late_success": 18.3,
    "abandons_after_grace": 12.7,
    "prefers_caller_reason": 10.1,
    "drops_tool_timeout": 6.8,
    "wrong_reason_source": 5.6,
}


def _searched(mutant: Mutant) -> bool:
    """Whether this profile searches for the mutant (``ci`` leaves the long searches out).  The
    stateful machine's caller aborts a signal: the mutants that only a caller cancelling the
    awaiting task shows (``Mutant.cancel``) are verify's and ``conform --cancel task``'s."""
    ci = os.environ.get("HYPOTHESIS_PROFILE", "ci") == "ci"
    by_signal = mutant.cancel == "signal"
    return by_signal and _default_retry(mutant) and not (ci and mutant.name in LONG_SEARCHES)


def test_every_long_search_names_a_shipped_mutant() -> None:
    assert set(LONG_SEARCHES) <= {m.name for m in MUTANTS if _default_retry(m)}


@pytest.mark.parametrize("mutant", [m for m in MUTANTS if _searched(m)], ids=lambda m: m.name)
@pytest.mark.rules("R13", "R17", "R21", "R22", "R27", "R28", "R29", "R31", "R34")
def test_the_stateful_test_kills_the_mutant(
    mutant: Mutant, caplog: pytest.LogCaptureFixture
) -> None:
    with mutant.active() as factory:
        machine = type("ContractMachine", (ContractMachine,), {"factory": factory})
        try:
            run_state_machine_as_test(machine, settings=kill_settings())
        except Exception as exc:
            cited = _cited_rules(exc)
        else:
            pytest.fail(f"mutant {mutant.name} ({mutant.what}, {mutant.rule}) survived")
    # A mutant's crashed calls must have been read by the world, not left to the collector: an
    # unread task exception logs at a random later moment (and crashed the next test, 3.11.7).
    with caplog.at_level(logging.ERROR, logger="asyncio"):
        gc.collect()
    unread = [r.getMessage() for r in caplog.records if "never retrieved" in r.getMessage()]
    assert not unread, f"{mutant.name}: a call's failure was left unread: {unread[0]}"
    print(f"{mutant.name}: killed, cited {', '.join(cited)} (the mutant breaks {mutant.rule})")
