"""Gate 1 for a wrapper-level candidate: a changed call sequence of one compiled graph.

A structural candidate changes *which* kernels run (one kernel regenerated under other
options, a producer fused into its consumer, a layout copy around a vendor call dropped):
its code is a new ``call(args)`` for one graph of Inductor's output module, in the shape
Inductor itself writes. That function is untrusted code that runs in the judge's stead, so
this gate reads its syntax tree and accepts only the statements Inductor's wrappers are made
of, with names it can account for:

* unpacking ``args`` and ``args.clear()``; ``assert_size_stride`` / ``assert_alignment``;
  ``with torch.cuda._DeviceGuard(i):`` and ``torch.cuda.set_device(i)``;
* buffers: ``bufN = empty_strided_cuda(shape, stride, torch.<dtype>)`` (``_cpu`` for CPU tensors) and
  ``bufN = reinterpret_tensor(name, shape, stride, offset)``, each with literal layouts;
  ``semaphores.zero_()`` of a ``torch.uint32`` buffer the call allocated (the semaphores that
  the programs of a cooperative reduction meet at, which start at zero);
  ``streamN = get_raw_stream(i)``; ``del`` of locals;
* launches: ``K.run(...)`` of a kernel the original module defines or of a candidate kernel
  (each passes gate 1 on its own), or ``K(...)`` where ``K`` is a C++ kernel (CPU tensors),
  ``extern_kernels.OP(...)`` of a vendor call the original already makes (alone, or assigned to a
  local as Inductor writes ``convolution``), with arguments that are locals, literals, ``None``,
  ``reinterpret_tensor`` views or tuples of these; ``torch.ops.aten.OP.OVERLOAD(...)`` of an ATen
  fallback the original already calls (attention, sort, scatter: what Inductor leaves to ATen), its
  result assigned to a local and its outputs taken as ``bufM = bufN[i]``; one of kernelopt's own ops
  that its compile options put in a graph (:data:`~kernelopt.capture.rewrites.passes.OWN_OPS`:
  ``torch.ops.kernelopt.row_softmax.default``, a softmax that reads its row once), called so;
* ``return`` of as many locals as the original returns.

Anything else is refused by rule: PyTorch calls and ATen calls the original does not make (the
way to hide work in the call sequence), arithmetic or indexing on tensors, a name that is not a
local, a kernel or one of those helpers (a global holding a cached result), control flow,
definitions, imports, and assignments to anything but a plain local. What it cannot see (a kernel dropped that
the model needed, buffers wired wrongly) is the model gate's to catch, as for any candidate.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from dataclasses import dataclass, field

from kernelopt.capture.call_sequence import WrapperFacts, fallback_name, wrapper_facts
from kernelopt.capture.rewrites.passes import OWN_OPS
from kernelopt.verify.static_findings import Finding, findings_verdict
from kernelopt.verify.static_rules import MAX_SOURCE_CHARS
from kernelopt.verify.verdict import Verdict

WRAPPER_RULES: dict[str, str] = {
    "size": "the source is too large to check",
    "syntax": "the candidate must be Python that parses",
    "shape": "one function `call` with the original's parameters",
    "torch_op": "no PyTorch or ATen calls (but the ATen fallbacks the original makes) and no tensor arithmetic: "
    "work runs in kernels and vendor calls",
    "name": "only locals, the graph's kernels and the wrapper's helpers may be named",
    "kernel": "only kernels the original defines or the candidate's own, verified, are launched",
    "vendor": "only vendor calls the original already makes",
    "statement": "only the statements Inductor's wrappers are made of",
    "return": "the graph returns as many outputs as the original",
}
PRIORITY = {rule: i for i, rule in enumerate(WRAPPER_RULES)}
ALLOCATORS = frozenset({"empty_strided_cuda", "empty_strided_cpu"})
HELPERS = ALLOCATORS | {"reinterpret_tensor", "get_raw_stream", "assert_size_stride", "assert_alignment"}
TRUSTED_NAMES = frozenset({"extern_kernels", "aten", "torch", "inductor_ops", "args", "self"})


def _is_vendor(func: ast.expr) -> bool:
    """``extern_kernels.OP``: a vendor call, as an expression statement (``out=``) or assigned."""
    return isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "extern_kernels"


def _found(rule: str, node: ast.AST | None, construct: str) -> Finding:
    return Finding(rule, getattr(node, "lineno", 1), construct, WRAPPER_RULES[rule])


@dataclass
class _Checker:
    facts: WrapperFacts
    kernels: frozenset[str]
    cpp_kernels: frozenset[str]
    found: list[Finding] = field(default_factory=list)
    local: set[str] = field(default_factory=set)
    results: set[str] = field(default_factory=set)  # locals holding an ATen fallback's tuple of outputs
    semaphores: set[str] = field(default_factory=set)  # uint32 buffers the call allocated

    # -- expressions ----------------------------------------------------------------------

    def literal(self, node: ast.expr, what: str) -> None:
        """Layouts, dtypes and sizes: numbers, tuples of numbers, ``torch.<dtype>``."""
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and what.startswith("assert_"):
            return  # the tag Inductor's size asserts carry ('input')
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float, bool)):
            return
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return self.literal(node.operand, what)
        if isinstance(node, ast.Tuple):
            for item in node.elts:
                self.literal(item, what)
            return
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "torch":
            return
        self.found.append(_found("statement", node, f"{what} is {ast.unparse(node)}, not a literal"))

    def operand(self, node: ast.expr) -> None:
        """An argument of a launch: a local, a literal (``None`` too, as ``bias=None``), a
        ``reinterpret_tensor`` view, or a tuple or list of these (a convolution's ``stride=(1, 1)``)."""
        if isinstance(node, ast.Name):
            self.read(node)
        elif isinstance(node, ast.Constant) and (node.value is None or isinstance(node.value, (int, float, bool))):
            return
        elif isinstance(node, (ast.Tuple, ast.List)):  # an ATen fallback's int[] or bool[] arguments
            for item in node.elts:
                self.operand(item)
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            self.operand(node.operand)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "reinterpret_tensor":
            self.view(node)
        else:
            self.expression(node)

    def read(self, node: ast.Name) -> None:
        if node.id not in self.local:
            self.found.append(_found("name", node, f"{node.id} is not a local of call"))

    def view(self, call: ast.Call) -> None:
        if len(call.args) != 4 or call.keywords:
            self.found.append(
                _found("statement", call, f"{ast.unparse(call)} is not reinterpret_tensor(t, shape, stride, offset)")
            )
            return
        source, *layout = call.args
        self.operand(source)
        for item in layout:
            self.literal(item, "a view's layout")

    def expression(self, node: ast.expr) -> None:
        """Whatever is not one of the accepted forms, named by what it is."""
        if isinstance(node, (ast.BinOp, ast.Subscript, ast.Compare, ast.BoolOp, ast.UnaryOp)):
            self.found.append(_found("torch_op", node, f"{ast.unparse(node)} (arithmetic or indexing)"))
        elif isinstance(node, ast.Call):
            self.found.append(_found("torch_op", node, f"a call to {ast.unparse(node.func)}"))
        elif isinstance(node, ast.Attribute):
            self.found.append(_found("name", node, f"{ast.unparse(node)}"))
        elif isinstance(node, ast.Name):
            self.read(node)
        else:
            self.found.append(_found("statement", node, f"{type(node).__name__.lower()} {ast.unparse(node)[:60]}"))

    # -- statements -----------------------------------------------------------------------

    def body(self, statements: Iterable[ast.stmt]) -> None:
        for statement in statements:
            self.statement(statement)

    def statement(self, node: ast.stmt) -> None:
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            return  # a docstring
        if isinstance(node, ast.Assign):
            return self.assign(node)
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
            return self.call(node.value)
        if isinstance(node, ast.Delete):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    self.read(target)
                    self.local.discard(target.id)
                else:
                    self.found.append(_found("statement", node, f"del {ast.unparse(target)}"))
            return
        if isinstance(node, ast.With):
            guard = node.items[0].context_expr if len(node.items) == 1 else None
            if not (
                isinstance(guard, ast.Call)
                and ast.unparse(guard.func) == "torch.cuda._DeviceGuard"
                and len(guard.args) == 1
                and not node.items[0].optional_vars
            ):
                self.found.append(_found("statement", node, f"with {ast.unparse(node.items[0])}"))
            else:
                self.literal(guard.args[0], "the device")
            return self.body(node.body)
        if isinstance(node, ast.Return):
            return self.returned(node)
        kind = {
            ast.For: "a loop",
            ast.While: "a loop",
            ast.If: "a branch",
            ast.Try: "a try block",
            ast.FunctionDef: "a function definition",
            ast.ClassDef: "a class definition",
            ast.Import: "an import",
            ast.ImportFrom: "an import",
            ast.Global: "a global declaration",
            ast.Nonlocal: "a nonlocal declaration",
        }.get(type(node), type(node).__name__)
        self.found.append(_found("statement", node, kind))

    def shadows(self, name: ast.Name, node: ast.stmt) -> bool:
        """Whether binding ``name`` would hide a name the rules trust (``extern_kernels``, ``aten``,
        ``torch``, a helper, a kernel): ``extern_kernels = x`` would turn a vendor call into a method
        of a tensor. Such a binding is a finding."""
        if name.id in TRUSTED_NAMES or name.id in HELPERS or name.id in self.kernels:
            self.found.append(_found("statement", node, f"a local named {name.id}, hiding the wrapper's own {name.id}"))
            return True
        return False

    def assign(self, node: ast.Assign) -> None:
        value = node.value
        if len(node.targets) != 1:
            self.found.append(_found("statement", node, "a chained assignment"))
            return
        target = node.targets[0]
        if isinstance(target, ast.Tuple) and isinstance(value, ast.Name) and value.id == "args":
            for item in target.elts:  # the graph's inputs
                if isinstance(item, ast.Name) and not self.shadows(item, node):
                    self.local.add(item.id)
                elif not isinstance(item, ast.Name):
                    self.found.append(_found("statement", node, f"unpacking into {ast.unparse(item)}"))
            return
        if not isinstance(target, ast.Name):
            self.found.append(_found("statement", node, f"an assignment to {ast.unparse(target)}"))
            return
        if self.shadows(target, node):
            return
        self.semaphores.discard(target.id)
        helper = value.func.id if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) else None
        if helper in ALLOCATORS and isinstance(value, ast.Call) and len(value.args) == 3 and not value.keywords:
            for item in value.args:
                self.literal(item, "a buffer's layout")
            if ast.unparse(value.args[2]) == "torch.uint32":
                self.semaphores.add(target.id)
        elif helper == "reinterpret_tensor" and isinstance(value, ast.Call):
            self.view(value)
        elif helper == "get_raw_stream" and isinstance(value, ast.Call) and len(value.args) == 1:
            self.literal(value.args[0], "the stream's device")
        elif isinstance(value, ast.Call) and _is_vendor(value.func):  # bufN = extern_kernels.convolution(...)
            self.call(value)
        elif isinstance(value, ast.Call) and fallback_name(value.func) in self.facts.fallback_ops:
            self.call(value)  # bufN = torch.ops.aten._scaled_dot_product_flash_attention.default(...)
            self.results.add(target.id)
        elif isinstance(value, ast.Call) and ast.unparse(value.func) in OWN_OPS:
            self.call(value)  # bufN = torch.ops.kernelopt.row_softmax.default(arg0_1, 1.0, True, False)
        elif (
            isinstance(value, ast.Subscript)
            and isinstance(value.value, ast.Name)
            and value.value.id in self.results
            and isinstance(value.slice, ast.Constant)
            and type(value.slice.value) is int
        ):
            self.read(value.value)  # bufM = bufN[0]: one output of that fallback, no arithmetic
        else:
            self.expression(value)
        self.local.add(target.id)

    def arguments(self, node: ast.Call) -> None:
        """A vendor call's or an ATen fallback's arguments, positional and by keyword: operands."""
        for arg in node.args:
            self.operand(arg)
        for keyword in node.keywords:
            self.operand(keyword.value)

    def call(self, node: ast.Call) -> None:
        func = node.func
        name = ast.unparse(func)
        if isinstance(func, ast.Attribute) and func.attr == "run" and isinstance(func.value, ast.Name):
            if func.value.id not in self.kernels:
                self.found.append(
                    _found("kernel", node, f"{func.value.id}.run: not a kernel of the graph or a candidate's")
                )
            for arg in node.args:
                self.operand(arg)
            for keyword in node.keywords:
                if keyword.arg == "stream" and isinstance(keyword.value, ast.Name):
                    self.read(keyword.value)
                else:
                    self.found.append(_found("statement", node, f"{name}(..., {ast.unparse(keyword)})"))
            return
        if _is_vendor(func):
            assert isinstance(func, ast.Attribute)
            if func.attr not in self.facts.vendor_ops:
                self.found.append(
                    _found("vendor", node, f"extern_kernels.{func.attr}: the original makes no such call")
                )
            return self.arguments(node)
        if fallback_name(func) in self.facts.fallback_ops or name in OWN_OPS:
            return self.arguments(node)
        if isinstance(func, ast.Name) and func.id in self.cpp_kernels:  # a C++ kernel is called directly
            for arg in node.args:
                self.operand(arg)
            if node.keywords:
                self.found.append(_found("statement", node, f"{name}(..., {ast.unparse(node.keywords[0])})"))
            return
        if name in ("assert_size_stride", "assert_alignment") and node.args and isinstance(node.args[0], ast.Name):
            self.read(node.args[0])
            for item in node.args[1:]:
                self.literal(item, f"{name}'s layout")
            return
        if name == "args.clear" and not node.args:
            return
        if (  # a cooperative reduction's semaphores, zeroed before its launch as Inductor writes it
            isinstance(func, ast.Attribute)
            and func.attr == "zero_"
            and isinstance(func.value, ast.Name)
            and func.value.id in self.semaphores
            and not node.args
            and not node.keywords
        ):
            return self.read(func.value)
        if name == "torch.cuda.set_device" and len(node.args) == 1:
            return self.literal(node.args[0], "the device")
        self.expression(node)

    def returned(self, node: ast.Return) -> None:
        values = node.value.elts if isinstance(node.value, ast.Tuple) else None
        if values is None:
            self.found.append(_found("return", node, "return of something other than a tuple of outputs"))
            return
        if len(values) != self.facts.outputs:
            self.found.append(
                _found("return", node, f"{len(values)} outputs returned, the original returns {self.facts.outputs}")
            )
        for value in values:
            self.operand(value)


def wrapper_findings(
    candidate_source: str,
    facts: WrapperFacts,
    candidate_kernels: Iterable[str] = (),
    candidate_cpp_kernels: Iterable[str] = (),
) -> list[Finding]:
    """Every broken rule of a candidate ``call`` function (source of the function alone).
    ``candidate_cpp_kernels``: those of the candidate's own kernels that are C++ (called directly)."""
    if len(candidate_source) > MAX_SOURCE_CHARS:
        return [_found("size", None, f"source is {len(candidate_source):,} characters (limit {MAX_SOURCE_CHARS:,})")]
    try:
        tree = ast.parse(candidate_source)
    except (SyntaxError, ValueError) as exc:
        return [Finding("syntax", getattr(exc, "lineno", None) or 1, f"syntax error: {exc}", WRAPPER_RULES["syntax"])]
    except (RecursionError, MemoryError):
        return [_found("size", None, "source nests too deeply to analyse")]
    functions = [n for n in tree.body if isinstance(n, ast.FunctionDef)]
    others = [n for n in tree.body if not isinstance(n, ast.FunctionDef)]
    if len(functions) != 1 or functions[0].name != "call" or others:
        return [_found("shape", others[0] if others else None, "the candidate is not one function named call")]
    call = functions[0]
    params = tuple(a.arg for a in call.args.args)
    found = []
    if params != facts.params or call.decorator_list or call.args.vararg or call.args.kwarg or call.args.kwonlyargs:
        found.append(
            _found("shape", call, f"call({', '.join(params)}) for the original's call({', '.join(facts.params)})")
        )
    cpp = frozenset(candidate_cpp_kernels)
    checker = _Checker(facts, facts.kernels | frozenset(candidate_kernels) | cpp, facts.cpp_kernels | cpp)
    checker.local.update(params)
    checker.body(call.body)
    return found + checker.found


def check_static_wrapper(
    candidate_source: str,
    *,
    original_source: str,
    candidate_kernels: Iterable[str] = (),
    candidate_cpp_kernels: Iterable[str] = (),
) -> Verdict:
    """Gate 1 for a changed call sequence of the graph whose output module is ``original_source``.
    ``candidate_kernels``: the names of the candidate's own kernels, each checked by gate 1 on its own
    (``candidate_cpp_kernels`` those of them that are C++, for CPU tensors)."""
    facts = wrapper_facts(original_source)
    kernels = sorted(set(candidate_kernels) | set(candidate_cpp_kernels))
    return findings_verdict(
        wrapper_findings(candidate_source, facts, kernels, candidate_cpp_kernels),
        PRIORITY,
        f"static checks passed for a call sequence of {len(facts.kernels) + len(kernels)} kernels; "
        f"{len(WRAPPER_RULES)} rules",
        {"level": "wrapper", "candidate_kernels": kernels, "rules": list(WRAPPER_RULES)},
    )
