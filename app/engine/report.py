"""One finished run as typed data: both passes, what was measured and how it was measured.

The engine builds a ``RunReport`` once (``measure_run``: SSIM and speedup are computed here and
nowhere else) and sends it as the payload of ``RunFinished``. The window, ``teacache-studio
generate`` and the history all read this object; ``to_json`` is its one serialisation (report.json,
and the report run.json holds once), ``RunReport.from_json`` reads it back (the history and a
saved threshold comparison read a run this way, never field by field): only these two know the
report's keys. ``speedup_label`` is the one function that says how a speedup was measured.
Qt-free and MLX-free.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np

from app.engine.request import GenerationRequest, InputImage, LoraSpec, QualityTarget
from app.engine.timing import MAX_TOLERANCE, Speedup, SpeedupKind, measure_speedup
from app.fileio.jsonio import json_float, json_int, json_str, json_time
from app.gate import Decision, Engagement, StepEvent
from app.gate.events import VANILLA, Figures
from app.gate.fill import recorded_fill
from app.gate.kinds import (
    GATE_KINDS,
    gate_fields_from_json,
    gate_fields_to_json,
    recorded_gate,
    signals_from_json,
)
from app.metrics import LocalDifference

MIN_SSIM_SIDE = 7  # scikit-image's SSIM window


def _now() -> datetime:
    return datetime.now().astimezone()


@dataclass(frozen=True, slots=True)
class PassResult:
    """One pass (vanilla or gated) as the report sees it: plain data, no MLX arrays."""

    image: np.ndarray  # uint8 RGB
    steps: tuple[StepEvent, ...]
    loop_seconds: float
    wall_seconds: float | None = None
    latents_sha256: str | None = None
    peak_memory_bytes: int | None = None
    resumed_from: int | None = None  # gated: steps before this one were replayed from vanilla
    # When the pass was timed (None: not known, a run saved before the time was recorded).
    measured_at: datetime | None = field(default_factory=_now)
    cached: bool = False  # vanilla reused from the engine's cache (measured at ``measured_at``)

    @property
    def pattern(self) -> str:
        return "".join(s.decision.letter for s in self.steps)

    @property
    def skipped(self) -> int:
        return sum(s.decision is Decision.skipped for s in self.steps)

    @property
    def computed(self) -> int:
        return sum(s.decision.computes for s in self.steps)

    @property
    def replayed_steps(self) -> int:
        return replayed_steps(self.resumed_from, len(self.steps))


@dataclass(frozen=True, slots=True)
class TargetProbe:
    """One real pass of a target search: the threshold tried and what it measured."""

    threshold: float
    skipped: int
    pattern: str
    ssim: float | None
    local_diff: float | None
    met: bool
    predicted_skipped: int | None = None  # the simulator's count on vanilla's trace
    ssimulacra2: float | None = None

    def as_dict(self) -> dict[str, object]:
        return {
            "threshold": self.threshold,
            "skipped": self.skipped,
            "predicted_skipped": self.predicted_skipped,
            "pattern": self.pattern,
            "ssim": self.ssim,
            "local_diff": self.local_diff,
            "ssimulacra2": self.ssimulacra2,
            "met": self.met,
        }


@dataclass(frozen=True, slots=True)
class TargetSearch:
    """How a target run found its threshold: every pass tried, in order, and the outcome."""

    target: QualityTarget
    probes: tuple[TargetProbe, ...]
    chosen_threshold: float
    met: bool  # a tried threshold with skips met the target (else threshold 0 was kept)
    note: str  # one sentence: what was chosen and why
    complete: bool = True  # False: cancelled, the best of the passes that finished

    def to_json(self) -> dict[str, object]:
        return {
            "target_ssim": self.target.min_ssim,
            "target_max_local_diff": self.target.max_local_diff,
            "target_ssimulacra2": self.target.min_ssimulacra2,
            "target_met": self.met,
            "target_note": self.note,
            "target_complete": self.complete,
            "target_search": [
                {**p.as_dict(), "chosen": p.threshold == self.chosen_threshold} for p in self.probes
            ],
        }


@dataclass(frozen=True, slots=True)
class RunReport:
    """Both passes of one run and what they measure. ``vanilla`` is None without a comparison."""

    request: GenerationRequest
    gated: PassResult
    vanilla: PassResult | None = None
    ssim: float | None = None
    max_abs_diff: float | None = None
    # Where skipping begins on this run's vanilla trace (the engine measures it once: the same
    # object rides in its engagement warning).
    engagement: Engagement | None = None
    # The gate's own parameters the report keeps, by kind (``GateKind.report_fields``: TeaCache's
    # polynomial and calibrated range, say); each kind writes and reads its section.
    gate_fields: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    versions: dict[str, str] = field(default_factory=dict)
    engine: str = "mflux"
    # The untimed warm-up before the first timed pass of this model and shape (None: warm).
    warmup_seconds: float | None = None
    # The worst window of the gated-vs-vanilla difference image (``app.metrics``): SSIM averages
    # over the image and can stay high while one object is lost.
    local_diff: LocalDifference | None = None
    # SSIMULACRA2 of the gated image against vanilla's (``app.metrics.ssimulacra2``): a perceptual
    # score, colour included, beside SSIM; None where undefined (no vanilla, shapes differ).
    ssimulacra2: float | None = None
    target_search: TargetSearch | None = None  # set on a target run (``app.engine.target``)

    @property
    def speedup_figure(self) -> Speedup | None:
        """The speedup and how it was arrived at (``app.engine.timing.measure_speedup``)."""
        v, g = self.vanilla, self.gated
        if v is None:
            return None
        return measure_speedup(
            v.steps,
            v.loop_seconds,
            g.steps,
            g.loop_seconds,
            replayed=g.replayed_steps,
            vanilla_cached=v.cached,
        )

    @property
    def speedup_unscaled(self) -> float | None:
        """The plain ratio of the two loop times, whenever each was measured."""
        return speedup(self.vanilla, self.gated)

    @property
    def rescaled(self) -> bool:
        figure = self.speedup_figure
        return figure is not None and figure.retimed

    @property
    def speedup(self) -> float | None:
        """Vanilla over gated, never above the ideal by more than the run's measured spread:
        1.00 with nothing skipped; re-timed to this run's computed steps with a cached vanilla
        or where the load changed during the run (``app.engine.timing``)."""
        figure = self.speedup_figure
        return None if figure is None else figure.value

    @property
    def speedup_basis(self) -> str:
        figure = self.speedup_figure
        return "" if figure is None else figure.basis

    @property
    def speedup_estimated(self) -> bool:
        figure = self.speedup_figure
        return figure is not None and (self.gated.replayed_steps > 0 or figure.retimed)

    @property
    def vanilla_cached(self) -> bool:
        return self.vanilla is not None and self.vanilla.cached

    @property
    def speedup_label(self) -> str:
        figure, vanilla = self.speedup_figure, self.vanilla
        if figure is None or vanilla is None:
            return ""
        return speedup_label(
            figure,
            replayed_steps=self.gated.replayed_steps,
            vanilla_cached=vanilla.cached,
            vanilla_measured_at=vanilla.measured_at,
        )

    @property
    def local_diff_value(self) -> float | None:
        return self.local_diff.value if self.local_diff is not None else None

    def to_json(self) -> dict[str, object]:
        """The report.json / run.json ``report`` object (the keys they always had, and more)."""
        r, g, v = self.request, self.gated, self.vanilla
        out: dict[str, object] = {
            "engine": self.engine,
            "variant": r.variant_id,
            "prompt": r.prompt,
            "seed": r.seed,
            "steps": r.steps,
            "threshold": r.threshold,
            "gate": r.gate,
            "fill": r.fill,
            "width": r.width,
            "height": r.height,
            "guidance": r.guidance,
            "quantize": r.quantize,
            "loras": [{"path": lora.path, "scale": lora.scale} for lora in r.loras],
            "model_path": r.model_path,
            "images": [image.as_json() for image in r.images],
            "strength": r.strength,
            "steps_left_out": r.steps_left_out,
            "skipped": g.skipped,
            "computed": g.computed,
            "pattern": g.pattern,
            "longest_skip_streak": longest_skip_streak(g.pattern),
            "steps_detail": [s.as_dict() for s in g.steps],
            "gated_seconds": g.loop_seconds,
            "gated_wall_seconds": g.wall_seconds,
            "resumed_from_step": g.resumed_from,
            "replayed_steps": g.replayed_steps,
            "gated_latents_sha256": g.latents_sha256,
            "gated_peak_memory_bytes": g.peak_memory_bytes,
            "versions": dict(self.versions),
            "gate_fields": gate_fields_to_json(self.gate_fields),
        }
        if v is not None:
            out.update(
                {
                    "vanilla_seconds": v.loop_seconds,
                    "vanilla_wall_seconds": v.wall_seconds,
                    "vanilla_pattern": v.pattern,
                    "vanilla_step_seconds": [s.seconds for s in v.steps],
                    # Each kind's columns (report.json's long-standing keys: TeaCache's trace,
                    # MagCache's ratios, the probe's changes)
                    **{
                        key: value
                        for kind in GATE_KINDS.values()
                        for key, value in kind.vanilla_columns(v.steps).items()
                    },
                    # The vanilla pass's steps whole (what a run read back shows and simulates
                    # on).
                    "vanilla_steps_detail": [step.as_dict() for step in v.steps],
                    "vanilla_latents_sha256": v.latents_sha256,
                    "vanilla_cached": v.cached,
                    "vanilla_measured_at": (
                        v.measured_at.isoformat(timespec="seconds") if v.measured_at else None
                    ),
                    "ssim": self.ssim,
                    "ssimulacra2": self.ssimulacra2,
                    "max_abs_diff": self.max_abs_diff,
                    "local_diff": self.local_diff.value if self.local_diff else None,
                    "local_diff_window": _window(self.local_diff),
                    "speedup_unscaled": self.speedup_unscaled,
                    "speedup_estimated": self.speedup_estimated,
                    **speedup_json(self.speedup_figure, self.speedup_label),
                }
            )
        out["warmup_seconds"] = self.warmup_seconds
        if self.engagement is not None:
            out["engagement"] = {
                "eligible_steps": self.engagement.eligible_steps,
                "onset_threshold": self.engagement.onset_threshold,
                "onset_step": self.engagement.onset_step,
            }
        if self.target_search is not None:
            out.update(self.target_search.to_json())
        return out

    @classmethod
    def from_json(
        cls,
        data: Mapping[str, Any],
        *,
        gated_image: np.ndarray,
        vanilla_image: np.ndarray | None = None,
        vanilla_steps: Sequence[StepEvent] | None = None,
        request: GenerationRequest | None = None,
    ) -> RunReport:
        """The report ``to_json`` wrote, read back with the run's images (saved beside it as
        PNGs). ``vanilla_steps`` are the vanilla pass's steps where the caller kept them apart;
        else they are read from ``vanilla_steps_detail`` (written since run.json holds the report
        once), else rebuilt from the JSON's per-step vanilla columns (decisions, step times and
        each kind's columns: what the report reads). ``request``
        defaults to the one the JSON records, as it ran (not checked again: a record, not a
        new request). Raises ``ValueError`` (one sentence) where a figure it needs is missing.

        The speedup and its label are derived again, as for a live report, never copied."""
        if request is None:
            request = request_from_json(data)
        steps = steps_from_json(data)
        gated_seconds = json_float(data.get("gated_seconds"))
        if gated_seconds is None:
            raise ValueError("the report has no gated time (gated_seconds)")
        gated = PassResult(
            gated_image,
            steps,
            gated_seconds,
            wall_seconds=json_float(data.get("gated_wall_seconds")),
            latents_sha256=json_str(data.get("gated_latents_sha256")),
            peak_memory_bytes=json_int(data.get("gated_peak_memory_bytes")),
            resumed_from=json_int(data.get("resumed_from_step")),
            measured_at=None,
        )
        vanilla = None
        vanilla_seconds = json_float(data.get("vanilla_seconds"))
        if vanilla_image is not None and vanilla_seconds is not None:
            vanilla = PassResult(
                vanilla_image,
                tuple(vanilla_steps) if vanilla_steps is not None else _vanilla_steps(data),
                vanilla_seconds,
                wall_seconds=json_float(data.get("vanilla_wall_seconds")),
                latents_sha256=json_str(data.get("vanilla_latents_sha256")),
                measured_at=json_time(data.get("vanilla_measured_at")),
                cached=data.get("vanilla_cached") is True,
            )
        local = json_float(data.get("local_diff"))
        window = data.get("local_diff_window")
        local_diff = None
        if local is not None and isinstance(window, Mapping):
            x, y, size = (json_int(window.get(k)) for k in ("x", "y", "size"))
            if x is not None and y is not None and size is not None:
                local_diff = LocalDifference(local, x, y, size)
        versions = data.get("versions")
        return cls(
            request=request,
            gated=gated,
            vanilla=vanilla,
            ssim=json_float(data.get("ssim")),
            ssimulacra2=json_float(data.get("ssimulacra2")),
            max_abs_diff=json_float(data.get("max_abs_diff")),
            engagement=_engagement_from_json(data.get("engagement")),
            gate_fields=gate_fields_from_json(data.get("gate_fields")),
            versions=(
                {str(k): str(v) for k, v in versions.items()}
                if isinstance(versions, Mapping)
                else {}
            ),
            engine=str(data.get("engine") or "mflux"),
            warmup_seconds=json_float(data.get("warmup_seconds")),
            local_diff=local_diff,
            target_search=target_search_from_json(data, request.threshold),
        )


def step_from_json(row: Mapping[str, Any], num_steps: int) -> StepEvent:
    """One ``StepEvent.as_dict`` row read back (``num_steps`` where the row does not say); each
    kind reads its own section of ``signals`` (``GateKind.figures_from_json``)."""
    gate = row.get("gate")
    return StepEvent(
        int(row["index"]),
        int(row.get("num_steps", num_steps)),
        Decision(row["decision"]),
        threshold=float(row.get("threshold", 0.0)),
        seconds=float(row.get("seconds", 0.0)),
        gate=VANILLA if gate == VANILLA else recorded_gate(gate),
        accumulated=json_float(row.get("accumulated")),
        signals=signals_from_json(row.get("signals")),
        fill=_fill_record(row.get("fill")),
    )


def _fill_record(value: object) -> dict[str, float]:
    """A step's recorded fill figures (``StepEvent.fill``); a figure strict JSON wrote as null
    (non-finite) is left out, as is anything not a number."""
    if not isinstance(value, Mapping):
        return {}
    return {str(k): v for k, x in value.items() if (v := json_float(x)) is not None}


def steps_from_json(data: Mapping[str, Any], key: str = "steps_detail") -> tuple[StepEvent, ...]:
    """A report's per-step record (the gated pass's, or ``vanilla_steps_detail``) read back;
    ``ValueError`` (one sentence) where it is missing or malformed."""
    rows = data.get(key)
    if not isinstance(rows, list):
        raise ValueError(f"the report has no per-step record ({key})")
    try:
        return tuple(step_from_json(row, len(rows)) for row in rows)
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"the report's step record is malformed ({exc})") from None


def _vanilla_steps(data: Mapping[str, Any]) -> tuple[StepEvent, ...]:
    """The vanilla pass's steps: ``vanilla_steps_detail`` where the report has it, else rebuilt
    from ``to_json``'s per-step vanilla columns (the pattern, the step times and each kind's
    columns, ``GateKind.column_figures``)."""
    if isinstance(data.get("vanilla_steps_detail"), list):
        return steps_from_json(data, "vanilla_steps_detail")
    pattern = str(data.get("vanilla_pattern") or "")
    n = len(pattern)
    seconds = data.get("vanilla_step_seconds")
    if not isinstance(seconds, list) or len(seconds) != n:
        seconds = [None] * n
    signals: list[dict[str, Figures]] = [{} for _ in range(n)]
    for name, kind in GATE_KINDS.items():
        for i, figures in enumerate(kind.column_figures(data, n)):
            signals[i][name] = figures
    letters = {d.letter: d for d in Decision}
    return tuple(
        StepEvent(
            i,
            n,
            letters[letter],
            threshold=0.0,
            seconds=json_float(seconds[i]) or 0.0,
            gate=VANILLA,
            signals=signals[i],
        )
        for i, letter in enumerate(pattern)
    )


def request_from_json(data: Mapping[str, Any]) -> GenerationRequest:
    """The request a report records (``to_json``'s keys), as it ran (not checked again: a
    record, not a new request); ``ValueError`` (one sentence) where it records none."""
    try:
        loras = tuple(
            LoraSpec(str(row["path"]), float(row["scale"])) for row in data.get("loras") or ()
        )
        return GenerationRequest(
            variant_id=str(data["variant"]),
            prompt=str(data["prompt"]),
            seed=int(data["seed"]),
            steps=int(data["steps"]),
            threshold=float(data["threshold"]),
            width=int(data["width"]),
            height=int(data["height"]),
            guidance=json_float(data.get("guidance")),
            quantize=json_int(data.get("quantize")),
            loras=loras,
            model_path=json_str(data.get("model_path")),
            gate=recorded_gate(data.get("gate")),
            fill=recorded_fill(data.get("fill")),
            images=tuple(InputImage.from_json(row) for row in data.get("images") or ()),
            strength=json_float(data.get("strength")),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"the report does not record its request ({exc})") from None


def _engagement_from_json(data: object) -> Engagement | None:
    if not isinstance(data, Mapping) or json_int(data.get("eligible_steps")) is None:
        return None
    return Engagement(
        json_int(data.get("eligible_steps")) or 0,
        json_float(data.get("onset_threshold")),
        json_int(data.get("onset_step")),
    )


def target_search_from_json(data: Mapping[str, Any], threshold: float) -> TargetSearch | None:
    rows = data.get("target_search")
    min_ssim = json_float(data.get("target_ssim"))
    min_ssimulacra2 = json_float(data.get("target_ssimulacra2"))
    if not isinstance(rows, list) or (min_ssim is None and min_ssimulacra2 is None):
        return None
    probes = tuple(
        TargetProbe(
            threshold=float(row["threshold"]),
            skipped=int(row["skipped"]),
            pattern=str(row.get("pattern") or ""),
            ssim=json_float(row.get("ssim")),
            local_diff=json_float(row.get("local_diff")),
            met=row.get("met") is True,
            predicted_skipped=json_int(row.get("predicted_skipped")),
            ssimulacra2=json_float(row.get("ssimulacra2")),
        )
        for row in rows
        if isinstance(row, Mapping) and json_float(row.get("threshold")) is not None
    )
    chosen = next(
        (float(row["threshold"]) for row in rows if isinstance(row, Mapping) and row.get("chosen")),
        threshold,
    )
    return TargetSearch(
        target=QualityTarget(
            min_ssim,
            json_float(data.get("target_max_local_diff")),
            min_ssimulacra2=min_ssimulacra2,
        ),
        probes=probes,
        chosen_threshold=chosen,
        met=data.get("target_met") is True,
        note=str(data.get("target_note") or ""),
        complete=data.get("target_complete") is not False,
    )


def measure_run(
    request: GenerationRequest,
    gated: PassResult,
    vanilla: PassResult | None,
    *,
    max_abs_diff: float | None = None,
    engagement: Engagement | None = None,
    gate_fields: Mapping[str, Mapping[str, Any]] | None = None,
    versions: dict[str, str] | None = None,
    engine: str = "mflux",
    warmup_seconds: float | None = None,
) -> RunReport:
    """The one place two passes become a result: SSIM, SSIMULACRA2 and the local difference are
    measured here (off the GUI thread)."""
    similarity = compare_images(gated.image, vanilla.image) if vanilla is not None else None
    local = local_difference(gated.image, vanilla.image) if vanilla is not None else None
    perceptual = perceptual_score(gated.image, vanilla.image) if vanilla is not None else None
    return RunReport(
        request=request,
        gated=gated,
        vanilla=vanilla,
        ssim=similarity,
        max_abs_diff=max_abs_diff,
        engagement=engagement,
        gate_fields=gate_fields or {},
        versions=versions or {},
        engine=engine,
        warmup_seconds=warmup_seconds,
        local_diff=local,
        ssimulacra2=perceptual,
    )


def perceptual_score(gated: np.ndarray, vanilla: np.ndarray) -> float | None:
    """SSIMULACRA2 of the gated image against vanilla's, or None where the shapes differ or the
    image is smaller than its 8-pixel floor."""
    if gated.shape != vanilla.shape or min(gated.shape[:2]) < 8 or np.ndim(gated) != 3:
        return None
    from app.metrics import ssimulacra2

    return ssimulacra2(vanilla, gated)


def local_difference(gated: np.ndarray, vanilla: np.ndarray) -> LocalDifference | None:
    """The worst local window of the difference, or None where the shapes differ."""
    if gated.shape != vanilla.shape or min(gated.shape[:2]) < 1:
        return None
    from app.metrics import local_difference as measure

    return measure(gated, vanilla)


def _window(local: LocalDifference | None) -> dict[str, int] | None:
    return None if local is None else {"x": local.x, "y": local.y, "size": local.size}


def compare_images(gated: np.ndarray, vanilla: np.ndarray) -> float | None:
    """SSIM of the two images, or None where it is undefined (different shapes, too small)."""
    if gated.shape != vanilla.shape or min(gated.shape[:2]) < MIN_SSIM_SIDE:
        return None
    from app.metrics import ssim

    return ssim(gated, vanilla)


def speedup(vanilla: PassResult | None, gated: PassResult) -> float | None:
    """Vanilla loop time over gated loop time (replayed steps count at vanilla's step times)."""
    if vanilla is None or not vanilla.loop_seconds or gated.loop_seconds <= 0:
        return None
    return vanilla.loop_seconds / gated.loop_seconds


def replayed_steps(resumed_from: int | None, steps: int) -> int:
    """Steps whose outputs came from the vanilla trajectory instead of the transformer: every
    step before ``resumed_from`` (0 replays nothing)."""
    return 0 if resumed_from is None else max(0, min(resumed_from, steps))


def speedup_json(figure: Speedup | None, label: str) -> dict[str, object]:
    """The speedup's keys in report.json: the figure, its label, how it was obtained, the ideal
    it is held to, the spread of the step ratios it used and the two times it is the ratio of."""
    if figure is None:
        return {"speedup": None, "speedup_label": label, "speedup_kind": None, "speedup_basis": ""}
    return {
        "speedup": figure.value,
        "speedup_label": label,
        "speedup_kind": figure.kind.value,
        "speedup_basis": figure.basis,
        "speedup_ideal": figure.ideal,
        "speedup_spread": figure.spread,
        "speedup_vanilla_seconds": figure.vanilla_seconds,
        "speedup_gated_seconds": figure.gated_seconds,
    }


def speedup_label(
    figure: Speedup,
    *,
    replayed_steps: int = 0,
    vanilla_cached: bool = False,
    vanilla_measured_at: datetime | None = None,
) -> str:
    """The one full label of a speedup, the same in the window, its tooltip, report.json, the
    history and every export. Its first clause says what the figure is ("measured", "nothing
    skipped", "estimate (k of n steps replayed)", "re-timed estimate"); a re-timed figure ends
    with the two times it is the ratio of, since they are not the times measured."""
    if figure.kind is SpeedupKind.nothing_skipped:
        return "nothing skipped"
    replayed = f" ({replayed_steps} of {figure.steps} steps replayed)" if replayed_steps else ""
    cached = ""
    if vanilla_cached:
        cached = "vanilla cached"
        if vanilla_measured_at is not None:
            cached += f" at {vanilla_measured_at:%H:%M}"
    if figure.kind is SpeedupKind.measured:
        return f"estimate{replayed}" if replayed else "measured"
    if figure.kind is SpeedupKind.not_retimed:
        first = f"estimate{replayed}" if replayed else "estimate"
        return f"{first}, {cached or 'vanilla cached'}, not re-timed (no step computed in this run)"
    parts = [f"re-timed estimate{replayed}"]
    steps_at = "steps at this run's mean computed-step time"
    if figure.kind is SpeedupKind.bounded:
        parts.append(
            f"the measured {figure.measured:.2f}× was above the ideal {figure.ideal:.2f}× "
            f"by more than its ±{_percent(min(figure.spread, MAX_TOLERANCE))} spread (the load "
            "changed during the run)"
        )
    else:
        steps_at += f" (±{_percent(figure.spread)})"
    if cached:
        parts.append(cached)
    parts.append(
        f"{steps_at}: {_seconds(figure.vanilla_seconds)} ÷ {_seconds(figure.gated_seconds)}"
    )
    return ", ".join(parts)


def label_head(label: str) -> str:
    """A speedup label's first clause ("measured", "nothing skipped", "re-timed estimate (3 of
    28 steps replayed)"): what a figure shown without its full label must still say."""
    return label.split(", ")[0]


def _percent(fraction: float) -> str:
    return "<1%" if fraction < 0.005 else f"{fraction:.0%}"


def _seconds(value: float) -> str:
    return f"{value:.3g} s"


def longest_skip_streak(pattern: str) -> int:
    return max(
        (len(run) for run in pattern.replace("F", "C").replace("N", "C").split("C")), default=0
    )
