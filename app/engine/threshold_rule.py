"""The rule that chose the shipped default thresholds, and its walk over a new calibration.

The rule (``choose``) is the one ``lab.demo.calibrate`` wrote for the demo's TeaCache default
(0.1: lab/demo/results/demo.threshold-sweep.json) and then read off the gate comparison for the
demo's MagCache default (0.02) and the first-block probe's (0.1): gated runs of several prompts at
the thresholds of ``GRID``, each against its own vanilla run; the threshold with the most skipped
steps inside ``SKIP_SHARE_BAND`` of the steps whose worst prompt keeps SSIM ≥ ``MIN_SSIM``; where
none lands in the band, the largest threshold that keeps that floor; where none keeps it with a
skip, none. A step-distilled model gets none at all: its shipped calibrations set none (demo-turbo:
each of its few steps carries much of the picture), and a calibration of it does the same.

A user calibration (``app.engine.calibration``) applies it to its own prompts (``ThresholdWalk``):
the simulator, on each prompt's vanilla trace, says which thresholds of the grid skip a step at all
(exactly: the simulator is exact up to the first skip); the walk measures them one at a time on
every prompt, each by a gated pass resumed from the prompt's vanilla run. It starts at the first
threshold the simulator says skips more than the band, goes up until a measured one does, then down
through the band until the rule's pick lies in it and the threshold below skips fewer steps; where
no threshold in the band keeps the floor it goes on to the largest that does. (Where the kind's
simulation is exact, MagCache's, its skips need no pass: it starts at the band's top and reads the
threshold below from the simulator.) So it measures the thresholds the rule can choose between, not
the whole grid: it takes more skips at a larger threshold and a worse worst prompt with more skips
(what the shipped sweeps show) for granted. A prompt the simulator says skips nothing at a
threshold is the vanilla run itself there (the resumed pass would replay every step: SSIM 1, no
pass), and where a kind's simulation is exact (MagCache: the pattern is its table's), a pattern
already measured on a prompt is not measured again.

Plain Python: no MLX, no Qt.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from statistics import fmean
from typing import Any

from app.gate.kinds import AnyGateKind

# The thresholds the rule tries (lab.demo.calibrate's sweep of the demo; the shipped MagCache and
# probe defaults lie on it too).
GRID = (
    0.0025,
    0.005,
    0.0075,
    0.01,
    0.0125,
    0.015,
    0.02,
    0.03,
    0.04,
    0.06,
    0.08,
    0.1,
    0.15,
    0.2,
    0.3,
    0.5,
)
SKIP_SHARE_BAND = (0.20, 0.40)  # of the steps, skipped on average over the prompts
MIN_SSIM = 0.90  # the worst prompt's SSIM against its vanilla image

RULE_WORDS = (
    f"the most skipped steps within {SKIP_SHARE_BAND[0]:.0%}–{SKIP_SHARE_BAND[1]:.0%} of the "
    f"steps with every prompt at SSIM ≥ {MIN_SSIM:.2f} against its vanilla image; where none "
    f"lands in that band, the largest threshold that keeps that floor (thresholds "
    f"{GRID[0]:g}–{GRID[-1]:g})"
)


@dataclass(frozen=True, slots=True)
class RuleRow:
    """One threshold measured on every prompt: skips (mean) and SSIM (mean, worst)."""

    threshold: float
    mean_skipped: float
    skip_share: float  # mean_skipped / steps
    mean_ssim: float
    min_ssim: float

    @property
    def safe(self) -> bool:
        """It skips, and every prompt keeps the floor."""
        return self.mean_skipped > 0 and self.min_ssim >= MIN_SSIM

    @property
    def in_band(self) -> bool:
        low, high = SKIP_SHARE_BAND
        return low <= self.skip_share <= high

    def to_json(self) -> dict[str, float]:
        return {
            "threshold": self.threshold,
            "mean_skipped": self.mean_skipped,
            "skip_share": self.skip_share,
            "mean_ssim": self.mean_ssim,
            "min_ssim": self.min_ssim,
        }


def choose(rows: Sequence[RuleRow]) -> RuleRow | None:
    """The rule: the largest skip share in the band among the rows that keep the floor, else the
    largest threshold that keeps it; None where no row skips and keeps it."""
    safe = [r for r in rows if r.safe]
    in_band = [r for r in safe if r.in_band]
    if in_band:
        return max(in_band, key=lambda r: r.skip_share)
    if safe:
        return max(safe, key=lambda r: r.threshold)
    return None


@dataclass(frozen=True, slots=True)
class Trial:
    """One prompt at one threshold of one gate's new calibration (``calibration``: its digest):
    the steps the gated pass skipped and its SSIM against the prompt's vanilla image. ``ran``:
    measured by a pass (else known without one: see the module docstring)."""

    gate: str
    threshold: float
    prompt: int
    calibration: str
    skipped: int
    ssim: float
    ran: bool = True

    @property
    def key(self) -> str:
        return trial_key(self.gate, self.threshold, self.prompt, self.calibration)

    def to_json(self) -> dict[str, Any]:
        return {
            "gate": self.gate,
            "threshold": self.threshold,
            "prompt": self.prompt,
            "calibration": self.calibration,
            "skipped": self.skipped,
            "ssim": self.ssim,
            "ran": self.ran,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Trial:
        return cls(
            gate=str(data["gate"]),
            threshold=float(data["threshold"]),
            prompt=int(data["prompt"]),
            calibration=str(data["calibration"]),
            skipped=int(data["skipped"]),
            ssim=float(data["ssim"]),
            ran=bool(data.get("ran", True)),
        )


@dataclass(frozen=True, slots=True)
class TrialSpec:
    """A trial about to run: the gate, the threshold and the prompt (its index in the job)."""

    gate: str
    threshold: float
    prompt: int


TRIAL_PREFIX = "trial-"


def trial_key(gate: str, threshold: float, prompt: int, calibration: str) -> str:
    return f"{TRIAL_PREFIX}{gate}-{threshold:g}-p{prompt:03d}-{calibration}"


def calibration_digest(kind: AnyGateKind, calibration: object) -> str:
    """Which calibration a trial measured: a digest of its parameters (threshold aside)."""
    params = kind.params(calibration, 0.0)
    return hashlib.sha256(repr(params).encode()).hexdigest()[:12]


@dataclass
class ThresholdWalk:
    """One gate's walk over ``GRID`` on a new calibration (see the module docstring). ``traces``:
    each prompt's trace of this kind, read from its vanilla pass; ``known``: trials measured
    before (a resumed command)."""

    gate: str
    kind: AnyGateKind
    calibration: object
    traces: Sequence[Sequence[Any]]
    steps: int
    known: dict[str, Trial] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.digest = calibration_digest(self.kind, self.calibration)
        self.results: dict[tuple[float, int], Trial] = {}
        self.aliases: dict[tuple[float, int], float] = {}  # waits for the source's pass
        self._by_pattern: dict[tuple[int, str], float] = {}  # (prompt, pattern) → its threshold
        self._patterns = {t: [self._pattern(t, trace) for trace in self.traces] for t in GRID}
        # The thresholds where at least one prompt skips a step (exact: the simulator is exact up
        # to the first skip, so no skip there is none in the gated pass either).
        self.engaging = [t for t in GRID if any("S" in p for p in self._patterns[t])]

    def _pattern(self, threshold: float, trace: Sequence[Any]) -> str:
        verdicts = self.kind.simulate(self.kind.params(self.calibration, threshold), trace)
        return "".join(v.decision.letter for v in verdicts)

    def simulated_share(self, threshold: float) -> float:
        return fmean(p.count("S") for p in self._patterns[threshold]) / self.steps

    # -- planning ----------------------------------------------------------------------------
    def next_threshold(self) -> float | None:
        """The next threshold to measure on every prompt, or None where the rule's answer is
        known (see the module docstring): first the smallest threshold the simulator says skips
        more than the band; upwards until a measured one does; then downwards through the band
        until the rule's pick is in it and the threshold below it skips fewer steps (a tie of
        skips is the rule's too: it keeps the smaller threshold); where none in the band keeps
        the floor, on to the largest that does (downwards, or upwards where that is the largest
        measured). Where the kind's simulation is exact, its skips need no pass: the walk starts
        in the band, and the threshold below is measured only where it skips as many."""
        low, high = SKIP_SHARE_BAND
        exact = self.kind.exact_simulation
        rows = {r.threshold: r for r in self.rows()}
        if not rows:
            if exact:
                within = [t for t in self.engaging if self.simulated_share(t) <= high]
                return within[-1] if within else (self.engaging[0] if self.engaging else None)
            past = [t for t in self.engaging if self.simulated_share(t) > high]
            return past[0] if past else (self.engaging[-1] if self.engaging else None)
        measured = sorted(rows)
        top, bottom = measured[-1], measured[0]
        up, down = self._beside(top, +1), self._beside(bottom, -1)
        below_top = all(rows[t].skip_share <= high for t in measured)
        if up is not None and below_top and not (exact and self.simulated_share(up) > high):
            return up
        pick = choose(list(rows.values()))
        if pick is not None and pick.in_band:
            ties = self.simulated_share(down) if exact and down is not None else None
            if ties is None:
                ties = rows[bottom].skip_share
            return down if ties >= pick.skip_share else None
        if down is not None and rows[bottom].skip_share >= low:
            return down  # the band may reach lower
        if pick is None:
            return down  # nothing keeps the floor yet: fewer skips might
        return up if pick.threshold == top else None

    def _beside(self, threshold: float, step: int) -> float | None:
        index = self.engaging.index(threshold) + step
        return self.engaging[index] if 0 <= index < len(self.engaging) else None

    def plan(self, thresholds: Sequence[float], prompt: int) -> list[float]:
        """Which of ``thresholds`` need a pass of ``prompt``; the others are recorded at once
        (known before, or the vanilla run itself) or wait for the pass of the same exact pattern
        (``record``)."""
        out: list[float] = []
        for t in thresholds:
            pattern = self._patterns[t][prompt]
            stored = self.known.get(trial_key(self.gate, t, prompt, self.digest))
            if stored is not None:
                self.results[(t, prompt)] = stored
            elif "S" not in pattern:  # the resumed pass would replay every step: vanilla itself
                self.results[(t, prompt)] = Trial(self.gate, t, prompt, self.digest, 0, 1.0, False)
            elif self.kind.exact_simulation and (prompt, pattern) in self._by_pattern:
                source = self._by_pattern[(prompt, pattern)]
                done = self.results.get((source, prompt))
                if done is None:
                    self.aliases[(t, prompt)] = source
                else:
                    self.results[(t, prompt)] = self._copy(done, t)
                continue
            else:
                out.append(t)
            self._by_pattern.setdefault((prompt, pattern), t)
        return out

    def _copy(self, trial: Trial, threshold: float) -> Trial:
        return Trial(
            self.gate, threshold, trial.prompt, self.digest, trial.skipped, trial.ssim, False
        )

    def record(self, threshold: float, prompt: int, skipped: int, ssim: float) -> Trial:
        """A pass finished: its trial, and those of the same prompt it stands for."""
        trial = Trial(self.gate, threshold, prompt, self.digest, skipped, ssim)
        self.results[(threshold, prompt)] = trial
        for (t, p), source in list(self.aliases.items()):
            if p == prompt and source == threshold:
                self.results[(t, p)] = self._copy(trial, t)
                del self.aliases[(t, p)]
        return trial

    # -- the outcome ---------------------------------------------------------------------------
    def rows(self) -> list[RuleRow]:
        """Every threshold measured on every prompt, in threshold order."""
        found = []
        for t in GRID:
            trials = [self.results.get((t, p)) for p in range(len(self.traces))]
            if any(trial is None for trial in trials):
                continue
            done = [trial for trial in trials if trial is not None]
            mean_skipped = fmean(trial.skipped for trial in done)
            found.append(
                RuleRow(
                    t,
                    mean_skipped,
                    mean_skipped / self.steps,
                    fmean(trial.ssim for trial in done),
                    min(trial.ssim for trial in done),
                )
            )
        return found

    def trials(self) -> list[Trial]:
        return [self.results[key] for key in sorted(self.results)]


@dataclass(frozen=True, slots=True)
class ThresholdChoice:
    """A new calibration's default threshold for one gate (None: no default, skipping stays off
    until one is set) and where it comes from: ``source`` is ``rule`` (this module's, on the
    calibration's prompts), ``given`` (the command line's ``--threshold``) or ``none`` (the rule
    found none, or the model is step-distilled); ``reason`` says it in one sentence (the dialog,
    the command line and the file)."""

    gate: str
    threshold: float | None
    source: str
    reason: str
    rows: tuple[RuleRow, ...] = ()
    trials: tuple[Trial, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "threshold": self.threshold,
            "source": self.source,
            "reason": self.reason,
            "rule": RULE_WORDS,
            "grid": list(GRID),
            "rows": [r.to_json() for r in self.rows],
            "trials": [t.to_json() for t in self.trials],
        }


def given_choice(gate: str, threshold: float) -> ThresholdChoice:
    return ThresholdChoice(gate, threshold, "given", f"{threshold:g}, as given")


def distilled_choice(gate: str, name: str, steps: int) -> ThresholdChoice:
    return ThresholdChoice(
        gate,
        None,
        "none",
        f"none: {name} is step-distilled, each of its {steps} steps a large stride, so like its "
        "shipped calibrations this one sets no default threshold: nothing is skipped until you "
        "set one",
    )


def rule_choice(walk: ThresholdWalk, prompts: int) -> ThresholdChoice:
    """The rule's answer on ``walk``'s measured rows, in words."""
    rows = walk.rows()
    chosen = choose(rows)
    steps, on = walk.steps, f"on your {prompts} prompts"
    if chosen is not None:
        low, high = SKIP_SHARE_BAND
        if chosen.in_band:
            why = (
                f"the most steps skipped within {low:.0%}–{high:.0%} of them with every prompt at "
                f"SSIM ≥ {MIN_SSIM:.2f}"
            )
        else:
            why = (
                f"no threshold skips {low:.0%}–{high:.0%} of the steps with every prompt at "
                f"SSIM ≥ {MIN_SSIM:.2f}, so the largest that keeps that floor"
            )
        reason = (
            f"{chosen.threshold:g}, chosen {on} by the rule that chose the shipped defaults: "
            f"{why} ({chosen.mean_skipped:.1f} of {steps} steps skipped on average, SSIM "
            f"{chosen.mean_ssim:.3f} on average and {chosen.min_ssim:.3f} on the worst prompt)"
        )
        return ThresholdChoice(
            walk.gate, chosen.threshold, "rule", reason, tuple(rows), tuple(walk.trials())
        )
    if not walk.engaging:
        reason = (
            f"none: no threshold up to {GRID[-1]:g} skips a step of your {prompts} prompts at "
            f"{steps} steps, so skipping stays off until you set a threshold"
        )
    else:
        gentlest = min(rows, key=lambda r: r.threshold)
        reason = (
            f"none: no threshold tried keeps every one of your {prompts} prompts at SSIM ≥ "
            f"{MIN_SSIM:.2f} while skipping (the gentlest, {gentlest.threshold:g}, skips "
            f"{gentlest.mean_skipped:.1f} of {steps} steps with the worst prompt at "
            f"{gentlest.min_ssim:.3f}), so skipping stays off until you set a threshold"
        )
    return ThresholdChoice(walk.gate, None, "none", reason, tuple(rows), tuple(walk.trials()))
