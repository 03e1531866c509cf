"""The registry of gate kinds (``app.gate.kinds``): every kind answers everything the app asks of a
gate, and nothing outside ``app/gate`` branches on a gate's name or parameter type, nor imports a
kind's own parameters, live gate, recorder or kind (AST checks over ``app/``, with their own
positive controls)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from app.gate import Decision, LiveGate, StepEvent
from app.gate.events import VANILLA
from app.gate.kinds import (
    DEFAULT_GATE,
    GATE_KINDS,
    GATES,
    AnyGateKind,
    UnknownGateError,
    calibrated_gates,
    check_gate,
    gate_kind,
    kind_of,
    make_gate,
    registered,
    vanilla_recorder,
)
from app.gate.kinds.base import PlotSpec, Signal
from app.gate.signals import Tap
from app.variants import get_variant

ROOT = Path(__file__).resolve().parents[2]
APP = ROOT / "app"
GATE_DIR = APP / "gate"
PARAM_TYPES = {kind.params_type.__name__ for kind in GATE_KINDS.values()}

KINDS = pytest.mark.parametrize("kind", list(GATE_KINDS.values()), ids=list(GATE_KINDS))


def test_the_registry_is_keyed_by_each_kinds_own_name() -> None:
    assert tuple(GATE_KINDS) == GATES and GATES[0] == DEFAULT_GATE
    for name, kind in GATE_KINDS.items():
        assert kind.name == name and kind.params_type.gate == name  # type: ignore[attr-defined]
        assert gate_kind(name) is kind and check_gate(name) == name
    with pytest.raises(UnknownGateError, match="choose one of: teacache, magcache, firstblock"):
        gate_kind("easycache")
    assert len({kind.label for kind in GATE_KINDS.values()}) == len(GATE_KINDS)
    keys = {kind.threshold_key("demo") for kind in GATE_KINDS.values()}
    assert len(keys) == len(GATE_KINDS)  # each gate's threshold is remembered apart
    assert set(calibrated_gates()) <= set(GATES)


def test_a_kind_registered_for_a_block_is_looked_up_as_the_shipped_ones() -> None:
    """``registered``: a kind from outside the package (a test's toy kind) joins the registry
    after the shipped ones for the block, and leaves it after, even on an error."""

    from app.gate.kinds.magcache import MagCacheKind

    class Renamed(MagCacheKind):
        name = "renamed"

    kind = Renamed()
    with registered(kind):
        assert gate_kind("renamed") is kind and check_gate("renamed") == "renamed"
        assert list(GATE_KINDS)[-1] == "renamed" and tuple(GATE_KINDS)[:-1] == GATES
        with pytest.raises(ValueError, match="registered already"), registered(kind):
            pass
    assert "renamed" not in GATE_KINDS
    with pytest.raises(RuntimeError, match="inside"), registered(kind):
        raise RuntimeError("inside the block")
    with pytest.raises(UnknownGateError):
        gate_kind("renamed")
    shipped = GATE_KINDS[DEFAULT_GATE]
    with pytest.raises(ValueError, match="registered already"), registered(shipped):
        pass


def smooth_vanilla_steps(steps: int) -> list[StepEvent]:
    """A vanilla run whose signals change smoothly: TeaCache's rel-L1, MagCache's ratio (it
    reads only the count) and the probe's first-block change against each previous step."""

    def change(i: int) -> float:
        return 0.05 + 0.001 * i

    return [
        StepEvent(
            i,
            steps,
            Decision.computed,
            threshold=0.0,
            seconds=0.1,
            gate=VANILLA,
            signals={
                "teacache": {"rel_l1": None if i == 0 else change(i), "predicted": None},
                "magcache": {"ratio": None if i == 0 else 1.0 - change(i)},
                "firstblock": {
                    "changes": tuple(change(i) * (k + 1) for k in range(min(i, 4))) if i else None
                },
            },
        )
        for i in range(steps)
    ]


@KINDS
def test_each_kind_answers_everything_the_app_asks(kind: AnyGateKind) -> None:
    """On the demo (which has every shipped kind's calibration): parameters, their kind, the
    simulator, onset, candidates, the live gate and the words, all from the kind alone."""
    demo = get_variant("demo")
    assert kind.name in demo.gates
    assert kind.label and kind.threshold_meaning.startswith(f"{kind.label}: ")
    assert kind.threshold_words and kind.threshold_quantity and kind.pass_name.endswith(" pass")
    assert isinstance(kind.plot, PlotSpec) and kind.plot.axis_label
    assert isinstance(kind.signal, Signal)
    assert kind.onset_source and kind.onset_quantity and kind.no_skip_reason
    calibration = kind.calibration_of(demo)
    assert calibration is not None
    threshold = kind.default_threshold(calibration)
    assert threshold is not None and 0 < threshold < 1
    params = kind.params(calibration, threshold)
    assert kind_of(params) is kind and params.threshold == threshold
    assert demo.params_for(kind.name, threshold) == params
    assert kind.params(calibration, 0.0).enabled is False

    steps = 28  # a smooth made-up vanilla run: each kind reads its own trace from its steps
    trace = kind.trace(smooth_vanilla_steps(steps))
    verdicts = kind.simulate(params, trace)
    assert len(verdicts) == steps
    assert kind.skipped(params, trace) == sum(v.decision is Decision.skipped for v in verdicts)
    onset = kind.engagement(params, trace)
    assert onset.onset_threshold is not None
    assert kind.engages(onset.onset_threshold, onset.onset_threshold) is kind.skips_at_onset
    found = kind.candidates(params, trace)
    assert found and [c.threshold for c in found] == sorted(c.threshold for c in found)
    for candidate in found:
        simulated = kind.simulate(params.with_threshold(candidate.threshold), trace)
        assert "".join(v.decision.letter for v in simulated) == candidate.pattern

    facts = kind.schedule(params, steps)
    assert facts.eligible == params.eligible_steps(steps) and facts.floor is not None
    assert kind.no_eligible_reason(params, 2) and kind.eligible_reason(facts.eligible, steps)
    assert kind.calibration_says_skips(calibration, steps, 0.9)

    assert kind.provenance_text(calibration) and kind.calibration_summary(calibration)
    assert kind.threshold_hint(params, steps).startswith(f"{facts.eligible} of {steps} steps")
    assert kind.caption(threshold) == f"{kind.label} t={threshold:.4g}"


class _Calibrations:
    """A variant stand-in holding the given calibrations by gate name."""

    def __init__(self, **found: object) -> None:
        self.calibrations = found


@KINDS
def test_each_kind_reads_its_calibration_by_its_calibration_type(kind: AnyGateKind) -> None:
    """One lookup for every kind (``GateKind.calibration_of``, keyed by ``calibration_type``):
    the variant's calibration of that type under the gate's name, else ``uncalibrated`` (None,
    or the probe's defaults); another kind's calibration under this name is not taken."""
    assert "calibration_of" not in vars(type(kind))  # the base's lookup, not a copy of it
    demo = get_variant("demo")
    calibration = kind.calibration_of(demo)
    assert isinstance(calibration, kind.calibration_type)
    assert kind.calibration_of(_Calibrations()) is kind.uncalibrated
    others = [c for name, c in demo.calibrations.items() if name != kind.name]
    for other in others:
        assert kind.calibration_of(_Calibrations(**{kind.name: other})) is kind.uncalibrated
    if kind.name in demo.calibrations:
        own = demo.calibrations[kind.name]
        assert kind.calibration_of(_Calibrations(**{kind.name: own})) is own


def test_only_the_probe_runs_without_a_calibration() -> None:
    from app.gate.kinds.firstblock import DEFAULTS

    assert {name: kind.uncalibrated for name, kind in GATE_KINDS.items()} == {
        "teacache": None,
        "magcache": None,
        "firstblock": DEFAULTS,
    }


@KINDS
def test_each_kind_builds_its_own_live_gate(kind: AnyGateKind) -> None:
    params = get_variant("demo").params_for(kind.name)
    gate = make_gate(params)
    assert isinstance(gate, LiveGate) and isinstance(gate, kind.live_class())
    assert gate.gate_name == kind.name and not gate.taps.records
    # The adapters build what the live gate declares: the kind's own signal.
    assert gate.signal is kind.signal


def test_the_vanilla_recorder_asks_every_kind_what_to_record() -> None:
    """One vanilla pass for every gate: the recorder holds each kind's own recorder (its taps:
    TeaCache the modulated input, MagCache the body residual, the probe the block residual at its
    depth; calibrating, TeaCache the output too), on any variant, whichever gate then runs."""
    for variant_id in ("demo", "flux3-image-klein"):  # with and without TeaCache numbers
        for calibrating in (False, True):
            recorder = vanilla_recorder(get_variant(variant_id), calibrating=calibrating)
            assert recorder.gate_name == VANILLA and recorder.taps.decides_on is None
            kinds = [r.kind for r in recorder.recorders]  # type: ignore[attr-defined]
            assert kinds == [n for n, k in GATE_KINDS.items() if k.recorder(None) is not None]
            assert set(kinds) == set(GATES)
            wanted = {Tap.modulated_input, Tap.body_residual, Tap.block_residual}
            assert recorder.taps.records == wanted | ({Tap.output} if calibrating else set())
            assert recorder.taps.split == 1  # the probe's depth


# -- no branch on a gate's name outside app/gate ---------------------------------------------------


CONSTANTS = {name.upper() for name in GATE_KINDS}  # MAGCACHE, TEACACHE: a name by another name


def _names_a_gate(node: ast.AST | None) -> bool:
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str) and node.value in GATE_KINDS
    if isinstance(node, ast.Name | ast.Attribute):
        return (node.id if isinstance(node, ast.Name) else node.attr) in CONSTANTS
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return any(_names_a_gate(element) for element in node.elts)
    return False


def _type_names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)} | {
        n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute)
    }


def _is_gate_branch(node: ast.AST) -> bool:
    if isinstance(node, ast.Compare):
        return any(_names_a_gate(o) for o in (node.left, *node.comparators))
    if isinstance(node, ast.MatchValue):
        return _names_a_gate(node.value)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        if node.func.id == "isinstance" and len(node.args) == 2:
            return bool(_type_names(node.args[1]) & PARAM_TYPES)
        return False
    if isinstance(node, ast.Dict):
        return any(_names_a_gate(k) for k in node.keys)
    return False


def gate_branches(source: str) -> list[int]:
    """Lines that compare with a gate's name (``==``, ``!=``, ``in``, ``match``), test a gate's
    parameter type with ``isinstance``, or key a table by gate names."""
    nodes = ast.walk(ast.parse(source))
    return [getattr(node, "lineno", 0) for node in nodes if _is_gate_branch(node)]


@pytest.mark.parametrize(
    ("source", "line"),
    [
        ('if gate == "magcache":\n    pass\n', 1),
        ('x = "teacache" != request.gate\n', 1),
        ('ok = gate in ("teacache", "magcache")\n', 1),
        ("if params.gate == MAGCACHE:\n    pass\n", 1),
        ("if gate != gates.TEACACHE:\n    pass\n", 1),
        ('match gate:\n    case "magcache":\n        pass\n', 2),
        ("if isinstance(params, MagCacheParams):\n    pass\n", 1),
        ("ok = isinstance(params, (app.gate.TeaCacheParams, int))\n", 1),
        ('LABELS = {"teacache": "TeaCache"}\n', 1),
    ],
)
def test_the_check_sees_a_gate_branch(source: str, line: int) -> None:
    assert gate_branches(source) == [line]


def test_the_check_leaves_lookups_alone() -> None:
    source = (
        "kind = gate_kind(request.gate)\n"
        "label = kind.label if kind.skips_at_onset else ''\n"
        'data["teacache"] = blob  # the PNG chunk named after the app\n'
    )
    assert gate_branches(source) == []


# -- no kind's own classes outside app/gate --------------------------------------------------------


def _own_names() -> set[str]:
    """What only a kind's own module may name: its parameters, live gate, recorder and kind
    classes, and the registry's ``*_KIND`` instances (code outside ``app/gate`` asks the registry:
    ``gate_kind(name)``, ``kind_of(params)``, ``make_gate``, ``vanilla_recorder``)."""
    import app.gate.kinds as kinds

    names = {name for name in dir(kinds) if name.endswith("_KIND")}
    for kind in GATE_KINDS.values():
        names |= {kind.params_type.__name__, kind.live_class().__name__, type(kind).__name__}
        recorder = kind.recorder(None)
        if recorder is not None:
            names.add(type(recorder).__name__)
    return names


OWN_NAMES = _own_names()


def kind_imports(source: str) -> list[int]:
    """Lines that import a kind's own class or instance (``from … import TeaCacheParams``) or
    reach it through a module (``live.TeaCacheGate``)."""

    def own(node: ast.AST) -> bool:
        if isinstance(node, ast.ImportFrom):
            return any(alias.name in OWN_NAMES for alias in node.names)
        return isinstance(node, ast.Attribute) and node.attr in OWN_NAMES

    return [getattr(node, "lineno", 0) for node in ast.walk(ast.parse(source)) if own(node)]


@pytest.mark.parametrize(
    ("source", "line"),
    [
        ("from app.gate import TeaCacheParams\n", 1),
        ("from app.gate.kinds import (\n    TEACACHE_KIND,\n)\n", 1),
        ("from app.gate.live import FirstBlockGate as Probe\n", 1),
        ("import app.gate.live\ngate = app.gate.live.MagCacheGate(params)\n", 2),
        ("from app.gate.kinds.magcache import MagCacheKind\n", 1),
        ("from app.gate.live import SignalRecorder\n", 1),
    ],
)
def test_the_check_sees_a_kinds_own_class_imported(source: str, line: int) -> None:
    assert {"TeaCacheParams", "MagCacheGate", "TEACACHE_KIND", "SignalRecorder"} <= OWN_NAMES
    assert kind_imports(source) == [line]


def test_the_check_leaves_the_registry_alone() -> None:
    source = (
        "from app.gate.kinds import GATE_KINDS, gate_kind, kind_of, make_gate, vanilla_recorder\n"
        "from app.gate import Decision, LiveGate, StepEvent\n"
        "params = gate_kind(request.gate).params(calibration)\n"
    )
    assert kind_imports(source) == []


def test_no_module_outside_app_gate_imports_a_kinds_own_class() -> None:
    offenders = [
        f"{path.relative_to(ROOT)}:{line}"
        for path in sorted(APP.rglob("*.py"))
        if GATE_DIR not in path.parents
        for line in kind_imports(path.read_text(encoding="utf-8"))
    ]
    assert not offenders, "ask app.gate.kinds instead: " + ", ".join(offenders)


def test_no_module_outside_app_gate_branches_on_a_gate() -> None:
    offenders = [
        f"{path.relative_to(ROOT)}:{line}"
        for path in sorted(APP.rglob("*.py"))
        if GATE_DIR not in path.parents
        for line in gate_branches(path.read_text(encoding="utf-8"))
    ]
    assert not offenders, "ask app.gate.kinds instead: " + ", ".join(offenders)
