"""The ``capture`` layer: Inductor's compiled model as a structured artifact."""

from __future__ import annotations

from kernelopt.capture.artifact import Artifact, CapturedGraph, capture
from kernelopt.capture.output_code import KernelDef, LaunchSite, OutputCode, parse_output_code, source_hash
from kernelopt.capture.recorder import ArgInfo, Launch, LaunchSink

__all__ = [
    "ArgInfo",
    "Artifact",
    "CapturedGraph",
    "KernelDef",
    "Launch",
    "LaunchSink",
    "LaunchSite",
    "OutputCode",
    "capture",
    "parse_output_code",
    "source_hash",
]
