"""Per-launch time attribution: arithmetic on hand-made events and on real H200 profiles."""

from __future__ import annotations

import json

import pytest
from conftest import FIXTURES

from kernelopt.capture import Launch
from kernelopt.measure import EventRecord, summarize

CAPTURES = FIXTURES / "inductor"


def ev(name: str, *, device: bool = False, annotation: bool = False, dur: float = 0.0, total: float = 0.0) -> EventRecord:
    return EventRecord(name, device, annotation, dur, total)


def test_summarize_hand_computed() -> None:
    records = [
        ev("kernelopt.launch.0", annotation=True, total=10.0),  # CPU range with its kernels' time
        ev("triton_poi_x", dur=10.0, device=True),
        ev("kernelopt.launch.0", device=True, annotation=True, dur=10.5),  # GPU mirror: never summed
        ev("kernelopt.launch.1", annotation=True, total=30.0),
        ev("sgemm", dur=20.0, device=True),
        ev("splitk_reduce", dur=10.0, device=True),
        ev("Memset", dur=2.0, device=True),  # outside any labelled range
        ev("kernelopt.launch.0", annotation=True, total=12.0),  # second iteration
        ev("triton_poi_x", dur=12.0, device=True),
        ev("kernelopt.launch.1", annotation=True, total=28.0),
        ev("sgemm", dur=28.0, device=True),
    ]
    a = summarize(records, "kernelopt.launch.", iterations=2)
    assert a.per_label_us == {"kernelopt.launch.0": 11.0, "kernelopt.launch.1": 29.0}
    assert a.device_total_us == pytest.approx((10 + 20 + 10 + 2 + 12 + 28) / 2)
    assert a.attributed_us == 40.0
    assert a.unattributed_us == pytest.approx(1.0)
    with pytest.raises(ValueError):
        summarize(records, "kernelopt.launch.", iterations=0)


@pytest.mark.parametrize("stem", sorted(p.name.removesuffix(".events.json") for p in CAPTURES.glob("*.events.json")))
def test_real_profiles_attribute_every_launch(stem: str) -> None:
    data = json.loads((CAPTURES / f"{stem}.events.json").read_text())
    launches = [Launch.from_dict(d) for d in json.loads((CAPTURES / f"{stem}.launches.json").read_text())["launches"]]
    records = [EventRecord(**r) for r in data["events"]]
    iterations = data["meta"]["iterations"]
    a = summarize(records, data["meta"]["label_prefix"], iterations)
    assert set(a.per_label_us) == {ln.label for ln in launches}
    assert all(t > 0 for t in a.per_label_us.values())
    # Every kernel the GPU ran was launched inside one of our ranges.
    assert a.attributed_us == pytest.approx(a.device_total_us, rel=0.01)
    # A Triton launch's time is exactly its kernel's GPU time.
    for launch in launches:
        if launch.kind == "triton":
            kernel_us = sum(r.duration_us for r in records if r.on_device and r.name == launch.name) / iterations
            assert a.per_label_us[launch.label] == pytest.approx(kernel_us, rel=1e-6)
