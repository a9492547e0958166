"""The knowledge layer: strategy and hardware cards, retrieval, experience memory."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from kernelopt.knowledge import (
    BOTTLENECKS,
    HARDWARE,
    KERNEL_KINDS,
    REQUIRED_SECTIONS,
    CardError,
    CardIndex,
    hardware_card,
    hardware_cards,
    memory,
    parse_card,
    retrieve,
    strategy_cards,
)
from kernelopt.store import Store

KNOWLEDGE_SRC = Path(__file__).resolve().parent.parent / "src" / "kernelopt" / "knowledge"

# -- cards ----------------------------------------------------------------------------------


def test_strategy_cards_parse_with_all_fields() -> None:
    cards = strategy_cards()
    assert len(cards) >= 14
    assert len({c.id for c in cards}) == len(cards)
    for card in cards:
        assert card.id and card.title, card.source
        assert card.bottleneck in BOTTLENECKS, card.source
        assert card.kernel_kinds and set(card.kernel_kinds) <= set(KERNEL_KINDS), card.source
        assert card.hardware and set(card.hardware) <= set(HARDWARE), card.source
        assert card.tags, card.source


def test_every_strategy_card_has_the_required_sections_and_a_triton_snippet() -> None:
    for card in strategy_cards():
        sections = card.sections()
        for heading in REQUIRED_SECTIONS:
            assert sections.get(heading), f"{card.source} lacks a non-empty '## {heading}' section"
        example = sections["Example"]
        assert "```python" in example and "@triton.jit" in example, card.source
        ast.parse(example.split("```python", 1)[1].split("```", 1)[0])  # the snippet is valid Python


def test_cards_cover_the_required_topics() -> None:
    by_id = {c.id: c for c in strategy_cards()}
    assert {"memory-bound", "compute-bound", "latency-bound", "any"} <= {c.bottleneck for c in by_id.values()}
    for topic in (
        "coalesced-vector-access", "eviction-policy-two-pass", "persistent-vs-looped-reduction",
        "wide-row-xblock-warps", "split-long-rows", "fuse-epilogue", "avoid-layout-copies", "online-softmax",
        "welford-norms", "tl-dot-tile-shapes", "num-stages-pipelining", "hopper-tma-descriptors",
        "fp32-accumulation-precision", "small-grid-latency", "masks-every-access", "constexpr-block-sizes",
        "int64-indexing", "libdevice-vs-tl-math",
    ):
        assert topic in by_id, topic
    assert by_id["hopper-tma-descriptors"].hardware == ("hopper",)
    assert by_id["small-grid-latency"].bottleneck == "latency-bound"


def test_hardware_cards_carry_the_spec_numbers() -> None:
    needed = ("compute_capability", "sms", "l2_mb", "hbm_tbps", "fp32_tflops", "tf32_tflops", "bf16_tflops",
              "registers_per_sm", "smem_per_sm_kb")
    cards = {c.id: c for c in hardware_cards()}
    assert set(cards) == {"nvidia-h200", "nvidia-h100-sxm", "nvidia-a100-80gb"}
    for card in cards.values():
        for key in needed:
            assert isinstance(card.fields.get(key), (int, float)), f"{card.source}: {key}"
    h200 = cards["nvidia-h200"].fields
    assert (h200["sms"], h200["compute_capability"], h200["hbm_tbps"]) == (132, 9.0, 4.8)
    assert 4.2 <= h200["measured_copy_tbps"] <= 4.3
    assert "4.2-4.3 TB/s" in cards["nvidia-h200"].body
    assert cards["nvidia-a100-80gb"].fields["sms"] == 108 and cards["nvidia-a100-80gb"].hardware == ("ampere",)


@pytest.mark.parametrize(
    "name, expected",
    [
        ("NVIDIA H200", "nvidia-h200"),
        ("NVIDIA H200 (cc 9.0, 132 SMs)", "nvidia-h200"),  # kernelopt's device label
        ("nvidia h200", "nvidia-h200"),
        ("H200", "nvidia-h200"),
        ("NVIDIA H100 80GB HBM3", "nvidia-h100-sxm"),
        ("NVIDIA A100-SXM4-80GB", "nvidia-a100-80gb"),
        ("NVIDIA H100 PCIe", None),  # a different part: no card rather than a wrong one
        ("NVIDIA H200 NVL", None),
        ("cpu (x86_64)", None),
    ],
)
def test_hardware_card_by_device_name(name: str, expected: str | None) -> None:
    card = hardware_card(name)
    assert (card.id if card else None) == expected


def test_parse_card_errors_name_the_file_and_problem() -> None:
    good = "---\nid: x\ntitle: X\nbottleneck: any\nkernel_kinds: [any]\nhardware: [any]\ntags: [t]\n---\nbody\n"
    card = parse_card(good, "x.md")
    assert (card.id, card.kernel_kinds, card.tags, card.body) == ("x", ("any",), ("t",), "body\n")
    with pytest.raises(CardError, match="x.md: front matter lacks tags"):
        parse_card(good.replace("tags: [t]\n", ""), "x.md")
    with pytest.raises(CardError, match="bottleneck 'io-bound'"):
        parse_card(good.replace("bottleneck: any", "bottleneck: io-bound"), "x.md")
    with pytest.raises(CardError, match="kernel_kinds has gemm"):
        parse_card(good.replace("kernel_kinds: [any]", "kernel_kinds: [gemm]"), "x.md")
    with pytest.raises(CardError, match="front-matter"):
        parse_card("no header", "x.md")


# -- retrieval -------------------------------------------------------------------------------


def _ids(cards) -> list[str]:
    return [c.id for c in cards]


def test_memory_bound_reduction_query_ranks_the_relevant_cards_first() -> None:
    query = "looped two-pass reduction re-reads each row from L2; rms norm of wide rows; eviction policy"
    top = _ids(retrieve(query, bottleneck="memory-bound", kernel_kind="reduction", hardware="hopper", k=4))
    assert top[0] == "eviction-policy-two-pass"
    assert "persistent-vs-looped-reduction" in top
    assert _ids(retrieve("softmax over long rows", "memory-bound", "reduction", "hopper"))[0] == "online-softmax"
    assert _ids(retrieve("layernorm mean and variance", "memory-bound", "reduction", "ampere"))[0] == "welford-norms"
    assert _ids(retrieve("transpose permute copy", "memory-bound", "pointwise", "hopper"))[0] == "avoid-layout-copies"


def test_retrieval_filters_by_bottleneck_kind_and_hardware() -> None:
    every = len(strategy_cards())
    compute = retrieve("tiles", bottleneck="compute-bound", k=every)
    assert compute and all(c.bottleneck in ("compute-bound", "any") for c in compute)
    assert _ids(retrieve("matmul tensor cores tile", "compute-bound", "template", "hopper"))[0] == "tl-dot-tile-shapes"

    pointwise = retrieve("reduction rows", kernel_kind="pointwise", k=every)
    assert all("pointwise" in c.kernel_kinds or "any" in c.kernel_kinds for c in pointwise)
    assert "eviction-policy-two-pass" not in _ids(pointwise)

    ampere = _ids(retrieve("TMA tensor descriptor", "compute-bound", "template", "ampere", k=every))
    assert "hopper-tma-descriptors" not in ampere
    assert _ids(retrieve("TMA tensor descriptor", "compute-bound", "template", "hopper"))[0] == "hopper-tma-descriptors"

    # cards marked "any" stay eligible under every filter
    anywhere = _ids(retrieve("mask bounds", "latency-bound", "scan", "ampere", k=every))
    assert anywhere[0] == "masks-every-access"
    assert {"fp32-accumulation-precision", "int64-indexing", "small-grid-latency"} <= set(anywhere)


def test_retrieval_fills_up_to_k_with_the_most_specific_eligible_cards() -> None:
    assert retrieve("anything", k=0) == []
    nothing_matches = retrieve("zzzz qqqq", "latency-bound", "pointwise", "ampere", k=2)
    assert _ids(nothing_matches)[0] == "small-grid-latency"  # exact bottleneck before "any" cards
    assert len(nothing_matches) == 2
    eligible = [c for c in strategy_cards() if c.applies_to("memory-bound", "reduction", "hopper")]
    assert len(retrieve("", "memory-bound", "reduction", "hopper", k=100)) == len(eligible)


def test_pure_python_bm25_when_fts5_is_missing_says_so_in_one_line() -> None:
    with pytest.warns(RuntimeWarning, match="no FTS5") as caught:
        index = CardIndex(strategy_cards(), use_fts5=False)
    assert "\n" not in str(caught[0].message)
    assert _ids(index.search("softmax over long rows", "memory-bound", "reduction", "hopper"))[0] == "online-softmax"
    top = _ids(index.search("two-pass reduction eviction policy L2", "memory-bound", "reduction", "hopper"))
    assert top[0] == "eviction-policy-two-pass"


def test_knowledge_layer_does_not_import_agents() -> None:
    for path in KNOWLEDGE_SRC.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            assert not any(n.startswith("kernelopt.agents") for n in names), f"{path.name} imports {names}"


# -- experience memory --------------------------------------------------------------------------


@pytest.fixture
def store(tmp_path: Path):
    with Store(tmp_path / "k.db") as s:
        yield s


def _history(store: Store) -> int:
    run = store.start_run("optimize", "p", "NVIDIA H200", {})
    rows = [
        ("eviction-policy-two-pass", "memory-bound", "reduction", 1.40, True),
        ("Eviction policy two pass", "memory-bound", "reduction", 0.95, False),  # same strategy, other spelling
        ("eviction_policy_two_pass", "memory-bound", "reduction", 1.10, True),
        ("split-long-rows", "memory-bound", "reduction", None, False),  # a gate failed before timing
        ("Split long rows", "memory-bound", "reduction", 1.30, False),  # timed, but not verified: not a speedup
        ("welford-norms", "memory-bound", "reduction", 0.90, False),
        ("tl-dot-tile-shapes", "compute-bound", "template", 1.20, True),  # other bottleneck
        ("split-long-rows", "memory-bound", "pointwise", 1.50, True),  # other kernel kind
    ]
    for strategy, bottleneck, kind, speedup, ok in rows:
        memory.record(store, run, strategy, bottleneck, kind, speedup, ok, {"what_worked": strategy})
    return run


def test_stats_arithmetic_per_strategy(store: Store) -> None:
    _history(store)
    stats = memory.stats(store, "memory-bound", "reduction")
    assert [s.strategy for s in stats] == ["eviction-policy-two-pass", "split-long-rows", "welford-norms"]
    eviction, split, welford = stats
    assert (eviction.tries, eviction.successes, eviction.best_speedup) == (3, 2, 1.40)
    assert eviction.success_rate == pytest.approx(2 / 3)
    assert (split.tries, split.successes, split.success_rate, split.best_speedup) == (2, 0, 0.0, None)
    assert (welford.tries, welford.successes, welford.best_speedup) == (1, 0, None)

    everything = {s.strategy: s for s in memory.stats(store, None, None)}
    assert everything["split-long-rows"].tries == 3 and everything["split-long-rows"].best_speedup == 1.50
    assert memory.stats(store, "compute-bound", "template")[0].strategy == "tl-dot-tile-shapes"
    assert memory.stats(store, "latency-bound", "reduction") == []


def test_to_avoid_lists_strategies_that_never_verified_faster(store: Store) -> None:
    _history(store)
    assert memory.to_avoid(store, "memory-bound", "reduction") == ["split-long-rows"]
    assert memory.to_avoid(store, "memory-bound", "reduction", min_tries=1) == ["split-long-rows", "welford-norms"]
    assert memory.to_avoid(store, "memory-bound", "reduction", min_tries=3) == []
    assert memory.to_avoid(store, "memory-bound", "pointwise") == []


def test_recent_is_newest_first_and_filters(store: Store) -> None:
    run = _history(store)
    latest = memory.recent(store, 2)
    assert [r.strategy for r in latest] == ["split-long-rows", "tl-dot-tile-shapes"]
    assert latest[0].kernel_kind == "pointwise" and latest[0].success is True and latest[0].run_id == run
    assert latest[0].record == {"what_worked": "split-long-rows"}
    only = memory.recent(store, 10, "memory-bound", "reduction")
    assert len(only) == 6 and only[0].strategy == "welford-norms"
    assert memory.recent(store, 0) == []


def test_record_validates_its_input(store: Store) -> None:
    with pytest.raises(ValueError, match="JSON-serializable"):
        memory.record(store, None, "s", "memory-bound", "reduction", 1.0, True, {"x": object()})
    with pytest.raises(ValueError, match="needs a name"):
        memory.record(store, None, " -- ", "memory-bound", "reduction", 1.0, True, {})
    with pytest.raises(ValueError, match="speedup"):
        memory.record(store, None, "s", "memory-bound", "reduction", float("nan"), True, {})
    assert memory.record(store, None, "s", "memory-bound", "reduction", None, False, {}) == 1
    assert memory.normalize_strategy("  Online Softmax! ") == "online-softmax"
