"""``teacache-studio calibrate`` behind the command line: the window's ``Calibrate`` job
(``app.engine.calibration``) through the one job runner, with the command line's resumable
chunks.

Each prompt's capture is written as one chunk the moment its pass finishes (``ChunkStore``, in
``<calibration>.chunks`` beside the calibration files), so Ctrl-C or ``--max-chunks`` keeps the
prompts done and a rerun of the same command resumes: the job is handed the stored captures and
runs only the others. So is each threshold trial (the passes that choose the default thresholds,
``app.engine.threshold_rule``), keyed by the calibration it tried. The calibration file itself is
written by the job once every prompt is in and every threshold chosen (atomically; over an
existing one only with ``--replace``). The chunks stay: a rerun with other fit settings
(``--mode``, ``--holdout``, ``--replace``) refits the prompts without a vanilla pass, and runs
threshold trials only where the fit changed.
"""

from __future__ import annotations

import sys
import threading
from dataclasses import dataclass, replace
from pathlib import Path

from app.bench.chunks import ChunkStore
from app.engine.calibration import Calibrate, CalibrationResult, PromptCapture
from app.engine.protocol import EngineProtocol
from app.engine.threshold_rule import TRIAL_PREFIX, Trial, TrialSpec
from app.gate.kinds import gate_kind


@dataclass(frozen=True, slots=True)
class CalibrationRun:
    """How a command's calibration ended: the result (None where it stopped early or failed),
    the prompts measured so far (stored chunks included) and the failure's sentence."""

    result: CalibrationResult | None
    done: int
    total: int
    failure: str | None = None


def chunk_key(index: int) -> str:
    return f"prompt{index:03d}"


def stored_captures(store: ChunkStore, count: int) -> tuple[PromptCapture | None, ...]:
    """The captures a previous run of the same command kept (None where none, or unreadable)."""
    found: list[PromptCapture | None] = []
    for index in range(count):
        data = store.load(chunk_key(index))
        try:
            found.append(None if data is None else PromptCapture.from_json(data))
        except (KeyError, TypeError, ValueError):
            found.append(None)  # torn or from another version: measure it again
    return tuple(found)


def stored_trials(store: ChunkStore) -> tuple[Trial, ...]:
    """The threshold trials a previous run of the same command kept (unreadable ones skipped:
    measured again)."""
    found: list[Trial] = []
    for path in sorted(store.directory.glob(f"{TRIAL_PREFIX}*.json")):
        data = store.load(path.stem)
        try:
            found.append(Trial.from_json(data or {}))
        except (KeyError, TypeError, ValueError):
            continue
    return tuple(found)


def run_calibration(
    job: Calibrate,
    chunks: Path,
    *,
    engine: EngineProtocol | None = None,
    progress: bool = True,
    max_chunks: int | None = None,
    fresh: bool = False,
) -> CalibrationRun:
    """Run ``job`` with the captures stored in ``chunks`` (``PlanMismatchError`` where they were
    made with other settings), storing each new one as it finishes; stop after ``max_chunks``
    new prompts. ``KeyboardInterrupt`` passes through: what finished is kept."""
    from tqdm import tqdm

    from app.engine import events as ev
    from app.engine.jobs import run_job
    from app.engine.loader import MEMORY_WARNING

    store = ChunkStore(chunks, job.capture_settings(), fresh=fresh)
    job = replace(
        job, captured=stored_captures(store, len(job.prompts)), tried=stored_trials(store)
    )
    total = len(job.prompts)
    done = total - len(job.pending())
    cancel = threading.Event()
    failures: list[str] = []
    bar = tqdm(
        total=total,
        initial=done,
        desc=f"calibrate {job.request.variant_id}",
        unit="prompt",
        file=sys.stderr,
        disable=not progress,
    )
    # How many trials the threshold rule needs is known only at its end: a count, not a bar.
    trials = tqdm(
        desc="choose thresholds",
        unit="pass",
        file=sys.stderr,
        disable=not progress,
        position=1,
        leave=False,
    )
    ran = 0

    def emit(event: object) -> None:
        nonlocal ran, done
        match event:
            case ev.PassStarted(which=ev.Pass.vanilla):
                pending = job.pending()
                if ran < len(pending):
                    bar.set_postfix_str(job.prompts[pending[ran]][:40])
            case ev.CalibrationProgress():
                store.save(chunk_key(event.index), event.capture.to_json())
                ran += 1
                done = event.done
                bar.update(1)
                if max_chunks is not None and ran >= max_chunks:
                    cancel.set()  # a stop the plan sees only where it wanted another prompt
            case ev.CalibrationTrials(trial=Trial() as trial):
                store.save(trial.key, trial.to_json())
                trials.update(1)
            case ev.CalibrationTrials(trying=TrialSpec() as trying):
                trials.set_postfix_str(
                    f"{gate_kind(trying.gate).label} {trying.threshold:g}, prompt "
                    f"{trying.prompt + 1}"
                )
            case ev.RunWarning() if progress and event.kind == MEMORY_WARNING:
                bar.write(f"warning: {event.message}", file=sys.stderr)
            case ev.RunFailed():
                failures.append(event.message)

    owned = engine is None
    if engine is None:
        from app.blas import preload_openblas

        preload_openblas()
        from app.engine.engine import Engine

        engine = Engine()
    try:
        result = run_job(engine, 1, job, emit, cancel)
    finally:
        trials.close()
        bar.close()
        if owned:
            engine.close()
    if result is not None:
        return CalibrationRun(result, total, total)
    return CalibrationRun(None, done, total, failures[0] if failures else None)
