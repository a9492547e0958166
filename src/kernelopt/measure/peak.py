"""The device's peak copy bandwidth: measured once per device, then read from the store."""

from __future__ import annotations

from kernelopt.measure import measure_copy_bandwidth
from kernelopt.measure.environment import device_label
from kernelopt.store import Store


def peak_bandwidth(store: Store | None, remeasure: bool = False) -> float:
    """Peak copy bandwidth in GB/s (bytes read + written) of the current device."""
    label = device_label()
    if store is not None and not remeasure:
        known = store.device_bandwidth(label)
        if known is not None:
            return known
    measured = measure_copy_bandwidth()
    if store is not None:
        store.set_device_bandwidth(
            label, measured.gbps, {"timing": measured.timing.to_dict(), "nbytes": measured.nbytes}
        )
    return measured.gbps
