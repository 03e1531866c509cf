"""Calibrating a model: vanilla passes of the user's prompts → each gate's calibration → one user
calibration file. The job (``Calibrate``) runs through the one job runner (``app.engine.jobs``,
``CalibratePlan``), for the window's Calibrate This Model… and ``teacache-studio calibrate``
alike.

Capture: one vanilla pass per prompt through the engine's ordinary ``run``, with
``capture_output`` set: every step computes, and each ``StepEvent`` carries the gate signal's
change against the previous step (``rel_l1``, x), the transformer output's change
(``output_rel_l1``, y) and the residual's magnitude ratio (``mag_ratio``). The request's gated pass
runs at threshold 0 resumed from that vanilla, so it replays every step (no transformer call) and
costs a decode. The job records and honours the model folder, quantization and LoRA set of its
request: the passes run with them, and the file says so (``CalibrationScope``).

Fit (``CalibrationMethod`` of each gate kind asked for): TeaCache's degree-4 polynomial, free and
through the origin (``app.gate.fit``), with R² on every pair and a held-out R² from a refit without
the last prompts, scored on those prompts (split by prompt: the pairs of one trajectory are
strongly correlated, so a split by pair would flatter the fit); MagCache's per-step table, the mean
magnitude ratio over the prompts.

Write: ``app.variants.user.save_calibration`` once every prompt is in, atomically and never over
an existing calibration (unless the command line's ``--replace``): a cancelled or failed job writes
nothing, so nothing half-made reaches the picker. Qt-free; no MLX here (the engine measures).
"""

from __future__ import annotations

import datetime as dt
import math
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from app.engine.report import RunReport
from app.engine.request import GenerationRequest, RequestError, check_prompt
from app.engine.threshold_rule import (
    ThresholdChoice,
    ThresholdWalk,
    Trial,
    TrialSpec,
    distilled_choice,
    given_choice,
    rule_choice,
)
from app.errors import UserFacingError
from app.gate import fit as polynomial
from app.gate.decision import Decision, GateConfigError
from app.gate.events import VANILLA, StepEvent
from app.gate.kinds import (
    DEFAULT_GATE,
    GATE_KINDS,
    CalibrationMethod,
    calibrated_gates,
    gate_kind,
    magcache_from_document,
)
from app.gate.magcache import GATE_NAME as MAGCACHE_SECTION
from app.gate.magcache import mean_ratio_table
from app.variants import Variant, get_variant
from app.variants.catalog import CalibrationScope
from app.variants.user import (
    CalibrationExistsError,
    calibration_exists,
    clash_message,
    save_calibration,
    scope_to_json,
    split_user_variant_id,
    user_variant_id,
    validate_name,
    with_user_calibration,
)

FIT_MODES = ("free", "origin", "both")
# A fit is made on some prompts and checked on another it has not seen (held-out R²), and
# MagCache's table is a mean over prompts: one prompt can do neither.
MIN_PROMPTS = 2
# A degree-4 polynomial has 5 coefficients: it needs at least 5 (signal, output) pairs.
MIN_PAIRS = polynomial.DEGREE + 1
DEFAULT_HOLDOUT = 0.3

# The fixed prompt list for real models, as the reference recipe does (research §8; the
# mlx-teacache list): short, and as different as can be. A family with a closed vocabulary
# suggests its own (``Family.calibration_prompts``).
REAL_PROMPTS = (
    "a red apple on a wooden table",
    "a mountain landscape at sunset",
    "a portrait of an old man with a beard",
    "abstract colorful circles",
    'a sign with the text saying "HELLO"',
    "a futuristic city skyline at night",
    "a watercolor painting of a cat",
    "a steampunk airship above the clouds",
    "a macro photo of a butterfly on a flower",
    "a neon-lit rainy street",
)

# MagCache recipe defaults for a new table: the reference's Qwen-Image recipe (retention 0.2,
# K 2), the more conservative of its two published image recipes (FLUX.1-dev: 0.1, K 5).
MAGCACHE_RETENTION = 0.2
MAGCACHE_MAX_SKIPS = 2


class CalibrationError(UserFacingError):
    """A calibration that cannot be made as asked; the message is one sentence."""


def default_prompts(variant: Variant) -> tuple[str, ...]:
    """The suggested prompts: the family's own (a closed vocabulary), else the general list."""
    return variant.family.calibration_prompts or REAL_PROMPTS


def parse_prompts(text: str) -> tuple[str, ...]:
    """One prompt per line; blank lines and lines starting with ``#`` are ignored."""
    prompts = [line.strip() for line in text.splitlines()]
    return tuple(p for p in prompts if p and not p.startswith("#"))


def read_prompts(path: Path) -> tuple[str, ...]:
    return parse_prompts(path.read_text(encoding="utf-8"))


def default_name(today: dt.date | None = None) -> str:
    return f"cal-{(today or dt.date.today()):%Y%m%d}"


def free_name(base_id: str, today: dt.date | None = None) -> str:
    """The default name, with ``-2``, ``-3``… where that calibration already exists."""
    stem = default_name(today)
    name, n = stem, 2
    while calibration_exists(user_variant_id(base_id, name)):
        name, n = f"{stem}-{n}", n + 1
    return name


@dataclass(frozen=True, slots=True)
class PromptCapture:
    """One prompt's vanilla pass as calibration data: the (signal, output) change pairs of its
    steps (x, y; step 0 has none), every step's magnitude ratio, and what the pass cost."""

    prompt: str
    step: tuple[int, ...]
    x: tuple[float, ...]
    y: tuple[float, ...]
    mag_ratio: tuple[float | None, ...]
    active_steps: int
    loop_seconds: float

    @classmethod
    def from_report(cls, prompt: str, report: RunReport) -> PromptCapture:
        vanilla = report.vanilla
        if vanilla is None:
            raise CalibrationError("the engine reported no vanilla pass to calibrate from")
        polynomial = _gate_of(CalibrationMethod.polynomial)
        table = _gate_of(CalibrationMethod.ratio_table)
        steps, xs, ys = [], [], []
        for event in vanilla.steps:
            figures = event.figures(polynomial)
            x, y = figures.get("rel_l1"), figures.get("output_rel_l1")
            if not (isinstance(x, float) and isinstance(y, float)):
                continue
            if not (math.isfinite(x) and math.isfinite(y)):
                continue
            steps.append(event.index)
            xs.append(x)
            ys.append(y)
        ratios = tuple(event.figures(table).get("ratio") for event in vanilla.steps)
        return cls(
            prompt=prompt,
            step=tuple(steps),
            x=tuple(xs),
            y=tuple(ys),
            mag_ratio=tuple(r if isinstance(r, float) else None for r in ratios),
            active_steps=len(vanilla.steps),
            loop_seconds=vanilla.loop_seconds,
        )

    def vanilla_steps(self, steps: int) -> list[StepEvent]:
        """The vanilla pass's steps as the gate kinds' simulators read them (``GateKind.trace``):
        the signal's change and the magnitude ratio of each of its ``steps`` steps."""
        changes = dict(zip(self.step, self.x, strict=True))
        ratios = self.mag_ratio
        polynomial = _gate_of(CalibrationMethod.polynomial)
        table = _gate_of(CalibrationMethod.ratio_table)
        return [
            StepEvent(
                i,
                steps,
                Decision.computed,
                threshold=0.0,
                seconds=0.0,
                gate=VANILLA,
                signals={
                    polynomial: {"rel_l1": changes.get(i)},
                    table: {"ratio": ratios[i] if i < len(ratios) else None},
                },
            )
            for i in range(steps)
        ]

    def to_json(self) -> dict[str, Any]:
        return {
            "prompt": self.prompt,
            "step": list(self.step),
            "x": list(self.x),
            "y": list(self.y),
            "mag_ratio": list(self.mag_ratio),
            "active_steps": self.active_steps,
            "loop_seconds": self.loop_seconds,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> PromptCapture:
        """A capture as ``to_json`` wrote it (the command line's resumable chunks)."""
        xs = tuple(float(v) for v in data["x"])
        return cls(
            prompt=str(data["prompt"]),
            step=tuple(int(s) for s in data.get("step", range(len(xs)))),
            x=xs,
            y=tuple(float(v) for v in data["y"]),
            mag_ratio=tuple(None if v is None else float(v) for v in data.get("mag_ratio", ())),
            active_steps=int(data.get("active_steps", 0)),
            loop_seconds=float(data.get("loop_seconds", 0.0)),
        )


@dataclass(frozen=True, slots=True)
class Calibrate:
    """A calibration job: vanilla passes of ``prompts`` made with ``request`` (its variant the one
    calibrated — a built-in variant or a model folder's, never a user calibration; its seed,
    steps, size, guidance, quantization and LoRA set are every pass's), saved as ``<variant>+
    <name>`` with a calibration for each of ``gates``.

    ``captured`` holds prompts already measured (a resumed command: None where not yet), so the
    job runs only the others. Each gate's default threshold is chosen on the prompts by the rule
    that chose the shipped ones (``app.engine.threshold_rule``: gated passes resumed from the
    prompts' vanilla runs; ``tried`` holds those a resumed command measured before), unless
    ``thresholds`` gives it. A calibration of the same name is refused unless
    ``replace_existing``."""

    request: GenerationRequest
    name: str
    prompts: tuple[str, ...]
    gates: tuple[str, ...] = field(default_factory=calibrated_gates)
    holdout: float = DEFAULT_HOLDOUT
    mode: str = "both"
    thresholds: tuple[tuple[str, float], ...] = ()
    retention_ratio: float = MAGCACHE_RETENTION
    max_consecutive_skips: int = MAGCACHE_MAX_SKIPS
    captured: tuple[PromptCapture | None, ...] = ()
    replace_existing: bool = False  # the command line's --replace: refit over a calibration
    # Threshold trials measured before (a resumed command): the walk runs only the others.
    tried: tuple[Trial, ...] = ()

    @property
    def variant_id(self) -> str:
        """The id the saved calibration gets: ``<base>+<name>``."""
        return user_variant_id(self.request.variant_id, self.name)

    @property
    def scope(self) -> CalibrationScope:
        r = self.request
        return CalibrationScope(
            model_path=r.model_path,
            loras=tuple((lora.path, float(lora.scale)) for lora in r.loras),
            quantize=r.quantize,
        )

    def pass_request(self, prompt: str) -> GenerationRequest:
        """One prompt's request: its vanilla pass records the calibration data; the gated pass
        at threshold 0 resumes from it (replays every step: no transformer call)."""
        return replace(
            self.request,
            prompt=prompt,
            threshold=0.0,
            gate=DEFAULT_GATE,
            compare_vanilla=True,
            resume=True,
            previews=False,
            capture_output=True,
        )

    def trial_request(
        self, prompt: int, gate: str, threshold: float, calibration: object
    ) -> GenerationRequest:
        """A threshold trial: ``gate`` at ``threshold`` on the calibration not yet saved,
        resumed from the prompt's vanilla (the engine keeps it under the same key)."""
        return replace(
            self.pass_request(self.prompts[prompt]),
            gate=gate,
            threshold=threshold,
            unsaved_calibration=calibration,
        )

    def chooses_thresholds(self) -> bool:
        """Whether the job runs threshold trials after the prompts (``ThresholdChooser``): a gate
        without a given threshold, on a model that is not step-distilled."""
        given = dict(self.thresholds)
        distilled = get_variant(self.request.variant_id).distilled
        return not distilled and any(gate not in given for gate in self.gates)

    def pending(self) -> list[int]:
        """The prompts (by index) still to measure."""
        return [
            i
            for i in range(len(self.prompts))
            if i >= len(self.captured) or self.captured[i] is None
        ]

    def capture_settings(self) -> dict[str, Any]:
        """What the captured data depend on (a resumed command must not mix two settings)."""
        r = self.request
        return {
            "variant": r.variant_id,
            "prompts": list(self.prompts),
            "seed": r.seed,
            "steps": r.steps,
            "width": r.width,
            "height": r.height,
            "guidance": r.guidance,
            "quantize": r.quantize,
            **({"loras": scope_to_json(self.scope)["loras"]} if r.loras else {}),
            **({"model_path": r.model_path} if r.model_path else {}),
        }


def check_calibration(job: Calibrate) -> None:
    """Everything that can be refused before the first pass, one sentence each
    (``CalibrationError``; ``CalibrationExistsError`` for a name taken): the name (plain, and not
    taken), the variant, the gates, the prompts (enough for the fit, none twice, each one the
    model can draw), the steps for the pairs."""
    try:
        validate_name(job.name)
    except ValueError as exc:
        raise CalibrationError(str(exc)) from None
    base_id = job.request.variant_id
    if split_user_variant_id(base_id) is not None:
        raise CalibrationError(
            f"{base_id} is a user calibration; calibrate its base variant instead"
        )
    if calibration_exists(job.variant_id) and not job.replace_existing:
        raise CalibrationExistsError(clash_message(base_id, job.name))
    variant = get_variant(base_id)
    if not job.gates:
        raise CalibrationError("name at least one gate to calibrate")
    for gate in job.gates:
        if gate_kind(gate).calibration_method is None:
            measured = " and ".join(gate_kind(g).label for g in calibrated_gates())
            raise CalibrationError(
                f"the {gate_kind(gate).label} needs no calibration: it runs on any model as it "
                f"is (a calibration measures {measured})"
            )
    if not (0.0 <= job.holdout < 1.0) or not math.isfinite(job.holdout):
        raise CalibrationError(f"the held-out share must be in [0, 1), got {job.holdout}")
    if job.mode not in FIT_MODES:
        raise CalibrationError(f"the fit mode must be one of {', '.join(FIT_MODES)}")
    for gate, threshold in job.thresholds:
        if not (math.isfinite(threshold) and 0.0 <= threshold <= 1.0):
            raise CalibrationError(f"the {gate} threshold must be between 0 and 1, got {threshold}")
    if not (0.0 <= job.retention_ratio < 1.0):
        raise CalibrationError(f"the retention ratio must be in [0, 1), got {job.retention_ratio}")
    if job.max_consecutive_skips < 1:
        raise CalibrationError("at most K steps reused in a row needs K of at least 1")
    count = len(job.prompts)
    if count < MIN_PROMPTS:
        raise CalibrationError(
            f"calibration needs at least {MIN_PROMPTS} prompts, got {count}: the fit is checked "
            "on a prompt it was not fitted on (held-out R²), and MagCache's table is a mean over "
            "prompts"
        )
    if len(set(job.prompts)) != count:
        raise CalibrationError("the prompt list holds a prompt twice")
    for prompt in job.prompts:
        try:
            check_prompt(variant, prompt)
        except RequestError as exc:
            raise CalibrationError(f"prompt {prompt!r}: {exc}") from None
    if CalibrationMethod.polynomial in _methods(job):
        fitting = len(split_prompts(count, job.holdout)[0])
        pairs = job.request.steps - 1  # every step after the first gives one pair
        if fitting * pairs < MIN_PAIRS:
            raise CalibrationError(
                f"{fitting} fitting prompt{'s' if fitting != 1 else ''} × {pairs} pairs "
                f"({job.request.steps} steps) is fewer than the {MIN_PAIRS} (signal, output) "
                "pairs a degree-4 fit needs: use more prompts or more steps"
            )


def _gate_of(method: CalibrationMethod) -> str:
    """The kind that calibrates by ``method``."""
    return next(name for name, kind in GATE_KINDS.items() if kind.calibration_method is method)


def _methods(job: Calibrate) -> dict[CalibrationMethod, str]:
    """Each calibration method asked for, and the gate it is for."""
    found: dict[CalibrationMethod, str] = {}
    for gate in job.gates:
        method = gate_kind(gate).calibration_method
        if method is not None:
            found[method] = gate
    return found


def split_prompts(count: int, holdout: float) -> tuple[list[int], list[int]]:
    """Fit and held-out prompt indices: the last ``round(holdout × count)`` prompts are held out
    (at least one when ``holdout > 0`` and there are two or more prompts; never all of them)."""
    if holdout <= 0 or count < 2:
        return list(range(count)), []
    held = min(count - 1, max(1, round(holdout * count)))
    return list(range(count - held)), list(range(count - held, count))


def fit_report(captures: Sequence[PromptCapture], holdout: float, mode: str) -> dict[str, Any]:
    """Fit the requested mode(s) with ``app.gate.fit``: coefficients and R² on every pair;
    held-out R² from a refit without the held-out prompts, scored on them. ``ValueError`` (one
    sentence) where there are too few pairs."""
    fit_idx, held_idx = split_prompts(len(captures), holdout)
    xs = [x for c in captures for x in c.x]
    ys = [y for c in captures for y in c.y]
    groups = [i for i, c in enumerate(captures) for _ in c.x]
    if len(xs) < MIN_PAIRS or sum(len(captures[i].x) for i in fit_idx) < MIN_PAIRS:
        raise ValueError(
            f"only {len(xs)} (signal, output) pairs; a degree-4 fit needs at least {MIN_PAIRS} "
            "on the fitting prompts — use more prompts or more steps"
        )
    modes: tuple[str, ...] = ("free", "origin") if mode == "both" else (mode,)
    fits = {
        name: polynomial.fit(xs, ys, mode=name, groups=groups, heldout=held_idx)  # type: ignore[arg-type]
        for name in modes
    }
    chosen = polynomial.choose(fits).mode if mode == "both" else mode
    return {
        "fit_prompts": fit_idx,
        "heldout_prompts": held_idx,
        "fit_pairs": len(xs),
        "heldout_pairs": sum(len(captures[i].x) for i in held_idx),
        "fits": {
            name: {
                "coefficients": list(fit.coefficients),
                "r2": fit.r2,
                "heldout_r2": fit.heldout_r2,
            }
            for name, fit in fits.items()
        },
        "chosen": chosen,
        "choice_rule": "app.gate.fit.choose: origin unless free is better on held-out R² by "
        "more than 0.02"
        if mode == "both"
        else f"--mode {mode}",
    }


def _recipe(job: Calibrate) -> dict[str, Any]:
    r = job.request
    return {
        "variant": r.variant_id,
        "gates": list(job.gates),
        "steps": r.steps,
        "size": [r.width, r.height],
        "seed": r.seed,
        "guidance": r.guidance,
        "quantize": r.quantize,
        "loras": scope_to_json(job.scope)["loras"],
        "model_path": r.model_path,
        "prompts": list(job.prompts),
        "holdout": job.holdout,
        "split": "by prompt: the last prompts of the list are held out",
    }


def _data_size(job: Calibrate, count: int) -> str:
    r = job.request
    return f"{count} prompts × {r.steps} steps, {r.width}×{r.height}, seed {r.seed}"


def _threshold_note(choice: ThresholdChoice | None) -> str:
    return "" if choice is None else f"; default threshold {choice.reason}"


def _polynomial_section(
    job: Calibrate, captures: Sequence[PromptCapture], choice: ThresholdChoice | None
) -> dict[str, Any]:
    """TeaCache's fit: coefficients, calibrated range, provenance, the fit's record and the raw
    pairs (``CalibrationError`` where there are too few pairs)."""
    try:
        report = fit_report(captures, job.holdout, job.mode)
    except ValueError as exc:
        raise CalibrationError(str(exc)) from None
    xs = [x for c in captures for x in c.x]
    ys = [y for c in captures for y in c.y]
    chosen = report["chosen"]
    fit = report["fits"][chosen]
    metric, value = (
        ("held-out R²", fit["heldout_r2"]) if fit["heldout_r2"] is not None else ("R²", fit["r2"])
    )
    scope = job.scope.lora_words()
    return {
        "coefficients": fit["coefficients"],
        "calibrated_range": [min(xs), max(xs)],
        "default_threshold": None if choice is None else choice.threshold,
        "provenance": {
            "source": f"teacache-studio calibrate ({chosen} fit), {dt.date.today().isoformat()}"
            + (f", {scope}" if scope else ""),
            "fit_metric": metric,
            "fit_value": value,
            "data_size": f"{len(xs)} pairs ({_data_size(job, len(captures))})",
            "notes": f"R² {fit['r2']:.3f} on all {report['fit_pairs']} pairs; held-out R² from "
            f"a refit without the last {len(report['heldout_prompts'])} prompts"
            + _threshold_note(choice),
        },
        "fit": {
            "mode": job.mode,
            "chosen": chosen,
            "degree": polynomial.DEGREE,
            "coefficient_order": "high → low (numpy poly1d)",
            **{
                k: report[k]
                for k in (
                    "fit_prompts",
                    "heldout_prompts",
                    "fit_pairs",
                    "heldout_pairs",
                    "fits",
                    "choice_rule",
                )
            },
        },
        "x_range": [min(xs), max(xs)],
        "y_range": [min(ys), max(ys)],
        "pairs": {
            "x": xs,
            "y": ys,
            "prompt_index": [i for i, c in enumerate(captures) for _ in c.x],
            "step": [s for c in captures for s in c.step],
        },
    }


def _ratio_table_section(
    job: Calibrate, captures: Sequence[PromptCapture], choice: ThresholdChoice | None
) -> dict[str, Any]:
    """MagCache's table: per step, the mean magnitude ratio over the prompts' vanilla passes (the
    reference's calibration measure, ``app.gate.live.magnitude_ratio``)."""
    traces = [list(c.mag_ratio) for c in captures]
    if any(not trace for trace in traces):
        raise CalibrationError(
            "these captured prompts predate MagCache calibration; start again from scratch"
        )
    try:
        table = mean_ratio_table(traces)
    except GateConfigError as exc:
        raise CalibrationError(str(exc)) from None
    spread = [
        max(t[i] for t in traces) - min(t[i] for t in traces)  # type: ignore[type-var, operator]
        for i in range(1, len(table))
    ]
    r = job.request
    return {
        MAGCACHE_SECTION: {  # the MagCache section (``magcache_from_document`` reads it)
            "ratios": list(table),
            "default_threshold": None if choice is None else choice.threshold,
            "retention_ratio": job.retention_ratio,
            "max_consecutive_skips": job.max_consecutive_skips,
            "provenance": {
                "source": f"teacache-studio calibrate, {dt.date.today()}: mean over prompts of "
                "mean_tokens(|r_i| / |r_i-1|), r = body output − body input "
                "(Zehong-Ma/MagCache @ df81cb1, MagCache4FLUX magcache_calibration)",
                "data_size": f"{_data_size(job, len(captures))}, guidance {r.guidance}",
                "fit_metric": "largest spread of a step's ratio across prompts",
                "fit_value": round(max(spread), 5),
                **({"notes": f"default threshold {choice.reason}"} if choice else {}),
            },
        },
        "per_prompt_ratios": traces,
    }


# How each calibration method is measured into the file (``GateKind.calibration_method``).
_SECTIONS: dict[
    CalibrationMethod,
    Callable[[Calibrate, Sequence[PromptCapture], ThresholdChoice | None], dict[str, Any]],
] = {
    CalibrationMethod.polynomial: _polynomial_section,
    CalibrationMethod.ratio_table: _ratio_table_section,
}


def calibration_document(
    job: Calibrate,
    captures: Sequence[PromptCapture],
    versions: dict[str, Any],
    choices: Mapping[str, ThresholdChoice] | None = None,
) -> dict[str, Any]:
    """The user-calibration file: the base variant's TeaCache numbers unless TeaCache is among the
    gates calibrated, each calibrated gate's section with its default threshold (``choices``,
    else the job's given one, else none), what it was measured under (``scope``), the recipe,
    and the versions. ``CalibrationError`` where the data cannot make a calibration."""
    base = get_variant(job.request.variant_id)
    given = {gate: given_choice(gate, t) for gate, t in job.thresholds}
    chosen = {**given, **(choices or {})}
    document: dict[str, Any] = {
        "base_variant": base.id,
        "name": job.name,
        "coefficients": None if base.coefficients is None else list(base.coefficients),
        "calibrated_range": None if base.calibrated_range is None else list(base.calibrated_range),
        "default_threshold": base.default_threshold,
        "provenance": {
            "source": (
                "the base variant's TeaCache fit, unchanged"
                if base.coefficients is not None
                else "no TeaCache calibration"
            )
            + " (this file adds "
            + ", ".join(gate_kind(g).label for g in job.gates)
            + ")",
        },
    }
    for method, gate in _methods(job).items():
        document.update(_SECTIONS[method](job, captures, chosen.get(gate)))
    document.update(
        {
            "threshold_choice": {gate: c.to_json() for gate, c in chosen.items()},
            "scope": scope_to_json(job.scope),
            "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            "recipe": _recipe(job),
            "versions": versions,
        }
    )
    return document


@dataclass(frozen=True, slots=True)
class CalibrationResult:
    """A saved calibration: the job, its new variant id, the file and what it holds, and the
    prompts' captures (in the job's order)."""

    job: Calibrate
    variant_id: str
    path: str
    document: dict[str, Any]
    captures: tuple[PromptCapture, ...]
    choices: tuple[ThresholdChoice, ...] = ()  # each calibrated gate's default threshold

    @property
    def fit(self) -> dict[str, Any] | None:
        """TeaCache's fit record, where the file holds a new polynomial."""
        return self.document.get("fit")

    @property
    def magcache_spread(self) -> float | None:
        table = magcache_from_document(self.document)
        if table is None or MAGCACHE_SECTION not in self.job.gates:
            return None
        return table.provenance.fit_value


def write_calibration(
    job: Calibrate,
    captures: Sequence[PromptCapture],
    versions: dict[str, Any],
    choices: Mapping[str, ThresholdChoice] | None = None,
) -> CalibrationResult:
    """Fit, then write the file atomically, over an existing one only where the job says so
    (``CalibrationError``/``CalibrationExistsError``: one sentence; nothing is written)."""
    document = calibration_document(job, captures, versions, choices)
    try:
        path = save_calibration(document, exclusive=not job.replace_existing)
    except OSError as exc:
        raise CalibrationError(f"could not write the calibration: {exc.strerror or exc}") from None
    made = {**{g: given_choice(g, t) for g, t in job.thresholds}, **(choices or {})}
    ordered = tuple(made[g] for g in job.gates if g in made)
    return CalibrationResult(job, job.variant_id, str(path), document, tuple(captures), ordered)


class ThresholdChooser:
    """Each calibrated gate's default threshold, by the shipped defaults' rule on the job's own
    prompts (``app.engine.threshold_rule``): a ``ThresholdWalk`` per gate over the calibration
    just fitted (``document``, not saved yet), one threshold of each walk a round, each prompt's
    trial one gated pass resumed from that prompt's vanilla (the engine's cached one). Each round
    goes prompt by prompt, every other round backwards (the engine keeps the most recent few
    vanilla runs). A gate given a threshold keeps it; a step-distilled model's gates get none,
    with the reason (``ThresholdChoice``)."""

    def __init__(
        self, job: Calibrate, captures: Sequence[PromptCapture], document: dict[str, Any]
    ) -> None:
        self.job = job
        base = get_variant(job.request.variant_id)
        draft = with_user_calibration(base, document)
        steps = job.request.steps
        known = {trial.key: trial for trial in job.tried}
        given = dict(job.thresholds)
        self.choices: dict[str, ThresholdChoice] = {}
        self.walks: list[ThresholdWalk] = []
        for gate in job.gates:
            kind = gate_kind(gate)
            if gate in given:
                self.choices[gate] = given_choice(gate, given[gate])
            elif base.distilled:
                self.choices[gate] = distilled_choice(gate, base.display_name, steps)
            else:
                traces = [kind.trace(c.vanilla_steps(steps)) for c in captures]
                calibration = kind.calibration_of(draft)
                self.walks.append(ThresholdWalk(gate, kind, calibration, traces, steps, known))
        self.queue: deque[tuple[ThresholdWalk, float, int]] = deque()
        self.done = 0
        self._backwards = True  # the first round starts where the vanilla passes ended

    def _plan_round(self) -> bool:
        """Queue each walk's next round; False where no walk has one."""
        rounds = [(walk, _listed(walk.next_threshold())) for walk in self.walks]
        prompts = range(len(self.job.prompts))
        for prompt in reversed(prompts) if self._backwards else prompts:
            for walk, thresholds in rounds:
                self.queue.extend((walk, t, prompt) for t in walk.plan(thresholds, prompt))
        self._backwards = not self._backwards
        return any(thresholds for _, thresholds in rounds)

    def next_trial(self) -> TrialSpec | None:
        """The next trial; None once every walk has the rule's answer."""
        while not self.queue:
            if not self._plan_round():
                return None
        walk, threshold, prompt = self.queue[0]
        return TrialSpec(walk.gate, threshold, prompt)

    def request(self) -> GenerationRequest:
        """The request of the trial ``next_trial`` named."""
        walk, threshold, prompt = self.queue[0]
        return self.job.trial_request(prompt, walk.gate, threshold, walk.calibration)

    def record(self, report: RunReport) -> Trial:
        """The trial at the head of the queue finished with ``report``."""
        walk, threshold, prompt = self.queue.popleft()
        if report.ssim is None:
            raise CalibrationError(
                f"no SSIM at {report.request.width}×{report.request.height}: the threshold "
                "cannot be chosen at this size"
            )
        self.done += 1
        return walk.record(threshold, prompt, report.gated.skipped, report.ssim)

    def outcome(self) -> dict[str, ThresholdChoice]:
        prompts = len(self.job.prompts)
        found = dict(self.choices)
        found.update({walk.gate: rule_choice(walk, prompts) for walk in self.walks})
        return {gate: found[gate] for gate in self.job.gates}


def _listed(threshold: float | None) -> list[float]:
    return [] if threshold is None else [threshold]
