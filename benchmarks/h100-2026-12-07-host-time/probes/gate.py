"""level2/13's graph candidate through the gates, the whole result printed"""
import json, sys
from dataclasses import asdict
from pathlib import Path
from kernelopt.capture.rewrites.cluster_group_norm import CLUSTER_GROUP_NORM_OPTION
from kernelopt.evaluate import worker_targets
from kernelopt.evaluate.gate_settings import GateSettings
from kernelopt.evaluate.session import ProblemSpec

problem = sys.argv[1]
spec = asdict(ProblemSpec(str(Path("examples/problems").resolve() / problem), {}))
settings = asdict(GateSettings(model_seeds=(0, 1), trials=30))
result = worker_targets.evaluate_graph(spec, 0, {CLUSTER_GROUP_NORM_OPTION: True}, settings, None)
result.pop("graph_candidate", None)
def short(v):
    if isinstance(v, dict): return {k: short(x) for k, x in v.items()}
    if isinstance(v, list) and len(v) > 12: return [short(x) for x in v[:12]] + ["..."]
    if isinstance(v, list): return [short(x) for x in v]
    if isinstance(v, str): return v[:300]
    return v
print(json.dumps(short(result), indent=1, default=str))
