"""The records that cross from the evaluation worker to a run: one serialisation, shape checked on arrival."""

from __future__ import annotations

import pytest
from test_optimize_flow import analysis

from kernelopt.evaluate.records import FinalCheck, ProblemAnalysis
from kernelopt.verify.verdict import Verdict


def test_an_analysis_round_trips_through_its_dict() -> None:
    data = analysis()
    record = ProblemAnalysis.from_dict(data)
    assert record.report.launches[0].headroom_us == 270.0 and record.kernels
    assert next(iter(record.kernels.values())).graph == 0
    assert record.to_dict() == data


def test_a_reply_missing_a_field_fails_where_it_arrives_by_name() -> None:
    data = analysis()
    del data["compiled_ms"]
    with pytest.raises(ValueError, match="lacks compiled_ms"):
        ProblemAnalysis.from_dict(data)
    data = analysis()
    del data["kernels"]
    with pytest.raises(ValueError, match="lacks kernels"):
        ProblemAnalysis.from_dict(data)


def _cmp(speedup: float) -> dict:
    return {"speedup": speedup, "speedup_q1": speedup, "speedup_q3": speedup}


@pytest.mark.parametrize(
    ("check", "faster", "reason"),
    [
        (FinalCheck(Verdict("model", False, "error 40x")), False, "error 40x"),
        (
            FinalCheck(Verdict("model", True, "ok"), evidence=Verdict("performance", False, "readings do not add up")),
            False,
            "readings do not add up",
        ),
        (FinalCheck(Verdict("model", True, "ok"), {"comparison": _cmp(1.2), "beyond_noise": False}), False, "noise"),
        (FinalCheck(Verdict("model", True, "ok"), {"comparison": _cmp(0.99), "beyond_noise": True}), False, "noise"),
        (FinalCheck(Verdict("model", True, "ok"), {"comparison": _cmp(1.2), "beyond_noise": True}), True, None),
    ],
)
def test_a_final_check_is_delivered_only_when_right_borne_out_and_faster(check, faster, reason) -> None:
    again = FinalCheck.from_dict(check.to_dict())
    assert again == check
    assert again.faster is faster
    if reason is not None:
        assert reason in again.reason


PY_HOSTS = {
    "baseline": {},
    "candidate": {"kernelopt.group_norm": "Python: the C++ host path did not build or load: nvcc not found"},
}


def test_a_refusal_names_the_own_ops_its_candidate_ran_through_python() -> None:
    """A candidate whose own op paid Python's host path at every call (level2/13's first H100 call: 1.004x,
    its path not recorded) says so in its refusal, at gate 4 and at the final check, and nowhere else."""
    from kernelopt.evaluate.records import naming_host_path, through_python

    assert through_python(PY_HOSTS) == [
        "kernelopt.group_norm (Python: the C++ host path did not build or load: nvcc not found)"
    ]
    cpp = {"candidate": {"kernelopt.group_norm": "C++: 1 plan(s) kept, 22 call(s) launched from C++, 1 handed"}}
    assert through_python(cpp) == [] and through_python(None) == [] and through_python({"baseline": {}}) == []
    refused = Verdict("performance", False, "1.004x is within noise")
    named = naming_host_path(refused, PY_HOSTS)
    assert named.reason.startswith("1.004x is within noise; the candidate's own ops ran Python's host path: ")
    assert "nvcc not found" in named.reason and not named.passed and named.gate == "performance"
    assert naming_host_path(refused, cpp) is refused  # the C++ path is no reason to name
    passed = Verdict("performance", True, "1.2x")
    assert naming_host_path(passed, PY_HOSTS) is passed
    slow = FinalCheck(Verdict("model", True, "ok"), {"comparison": _cmp(1.001), "beyond_noise": False, "op_hosts": PY_HOSTS})
    assert slow.reason.startswith("no end-to-end speedup beyond noise; the candidate's own ops ran Python's host path")
    fine = FinalCheck(Verdict("model", True, "ok"), {"comparison": _cmp(1.001), "beyond_noise": False, "op_hosts": cpp})
    assert fine.reason == "no end-to-end speedup beyond noise"
