"""Probe: a row split across several cooperating programs, each holding its part of the row in registers.

Inductor writes a wide-row normalization (softmax, log-softmax, group norm, row L2) as a looped
reduction that reads the row twice, because one program's registers cannot hold it. Under its
cooperative reductions, with the reduction kept persistent and RSPLIT programs per row, each
program loads its part once, the programs exchange partial results through a workspace and a
barrier, and the output comes from registers: one read. Inductor only does that for at most 16
rows (it keeps every program resident); this probe forces it for every row count and times it.

    python3 scripts/device/row_split_probe.py PROBLEM.py SPLIT [SPLIT ...]   (one problem a process)
Prints one JSON line per variant: ms (median, L2 flushed, interleaved with the default compile),
max abs error against eager, and the kernel source of the first split to $OUT.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
import statistics
import sys

import torch
import torch._inductor.config as inductor_config
import torch._inductor.runtime.triton_heuristics as th
from torch._inductor.choices import InductorChoices
from torch._inductor.utils import run_and_get_code
from torch._inductor.virtualized import V

SPLIT = [1]


def patched_cooperative(size_hints, reduction_hint, triton_meta, filename, inductor_meta):  # type: ignore[no-untyped-def]
    # Inductor's split is last_power_of_2(SMs) // xnumel: give it a grid as large as the split asks.
    tm = dict(triton_meta)
    dev, sms = tm["device"], SPLIT[0] * size_hints["x"]
    tm["device"] = (
        dev._replace(multi_processor_count=sms)  # a NamedTuple in some torch versions
        if hasattr(dev, "_replace")
        else dataclasses.replace(dev, multi_processor_count=sms)
    )
    if os.environ.get("PROBE_ORDINARY_LAUNCH"):
        # More programs than fit at once: launched as an ordinary grid, relying on the hardware starting
        # blocks in order (the RSPLIT programs of a row are neighbours), which CUDA does not promise.
        tm["launch_cooperative_grid"] = False
    return _original(size_hints, reduction_hint, tm, filename, inductor_meta)


_original = th.cooperative_reduction
th.cooperative_reduction = patched_cooperative


class RowSplitChoices(InductorChoices):
    """Cooperative for every reduction of 4096 or more, and then persistent (signatures differ by torch)."""

    def should_use_cooperative_reduction(self, *args):  # type: ignore[no-untyped-def]
        features = next((a for a in args if hasattr(a, "reduction_numel")), None)
        rnumel = features.reduction_numel if features is not None else args[-1]
        return V.graph.sizevars.statically_known_geq(rnumel, 4096)

    def should_use_persistent_reduction(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        if any(a is True for a in args) or kwargs.get("cooperative_reduction"):
            return True
        return super().should_use_persistent_reduction(*args, **kwargs)


def load(path: str):  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("problem", path)
    mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    sys.modules["problem"] = mod  # Dynamo looks the module of a traced forward up by name
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod


def time_interleaved(fns: dict, args: list, rounds: int = 30) -> dict:  # type: ignore[type-arg]
    flush = torch.empty(256 * 1024 * 1024 // 4, device="cuda")
    times: dict = {k: [] for k in fns}
    for f in fns.values():
        f(*args)
    torch.cuda.synchronize()
    for _ in range(rounds):
        for k, f in fns.items():
            flush.zero_()
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            f(*args)
            e.record()
            torch.cuda.synchronize()
            times[k].append(s.elapsed_time(e))
    return {k: (statistics.median(v), statistics.quantiles(v, n=4)) for k, v in times.items()}


def entry(model, name: str):  # type: ignore[no-untyped-def]
    """A function of its own per variant: Dynamo keeps compiled code per code object, so variants
    compiled from one forward would all run whichever was compiled last."""
    ns: dict = {}
    exec(f"def forward_{name}(*args):\n    return model(*args)", {"model": model}, ns)  # noqa: S102
    return ns[f"forward_{name}"]


def main() -> None:
    path, splits = sys.argv[1], [int(s) for s in sys.argv[2:]]
    out = os.environ.get("OUT", "/tmp")
    mod = load(path)
    torch.manual_seed(0)
    model = mod.Model(*mod.get_init_inputs()).cuda().eval()
    args = [a.cuda() if isinstance(a, torch.Tensor) else a for a in mod.get_inputs()]
    with torch.no_grad():
        ref = model(*args)
        fns = {"default": torch.compile(entry(model, "default"))}
        fns["default"](*args)
        for k in splits:
            SPLIT[0] = k
            V.set_choices_handler(RowSplitChoices())
            with inductor_config.patch({"force_disable_caches": True, "triton.cooperative_reductions": True}):
                f = torch.compile(entry(model, f"split{k}"))
                try:
                    res, code = run_and_get_code(f, *args)
                except Exception as e:  # noqa: BLE001
                    print(json.dumps({"problem": path, "split": k, "error": f"{type(e).__name__}: {e}"[:400]}))
                    continue
                finally:
                    V.set_choices_handler(InductorChoices())
            err = (res.float() - ref.float()).abs().max().item()
            name = os.path.basename(path).removesuffix(".py")
            with open(f"{out}/{name}_split{k}.py", "w") as fh:
                fh.write("\n\n".join(code))
            fns[f"split{k}"] = f
            print(json.dumps({"problem": name, "split": k, "max_abs_err": err,
                              "cooperative": "cooperative_reduction" in "".join(code)}), flush=True)
        timed = time_interleaved(fns, args)
    for k, (med, q) in timed.items():
        print(json.dumps({"problem": os.path.basename(path), "variant": k, "ms": round(med, 4),
                          "q1": round(q[0], 4), "q3": round(q[2], 4)}), flush=True)


if __name__ == "__main__":
    main()
