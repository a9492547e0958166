"""A cheat against a static gate: an honest source with one edit, refused by the rule it targets."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from kernelopt.verify.verdict import Verdict


def assert_refused(
    verdict_of: Callable[[str], Verdict], honest: str, cheat: tuple[str, str, str], rules: Mapping[str, str]
) -> None:
    """``cheat`` is (rule, text of ``honest`` to replace, replacement): the edited source must fail
    gate 1 with ``rule`` among its findings, and the reason must say what the deciding rule asks."""
    rule, old, new = cheat
    assert old in honest, f"the cheat's anchor is not in the honest source: {old!r}"
    verdict = verdict_of(honest.replace(old, new, 1))
    assert not verdict.passed
    found = {v["rule"] for v in verdict.details["violations"]}
    assert rule in found, (verdict.reason, found)
    assert verdict.reason.startswith("line ") and rules[verdict.details["rule"]] in verdict.reason
