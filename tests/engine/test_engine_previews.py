"""Live step previews through the engine, on the embedded demo (its decoder decodes exactly).

Oracles: paired same-process runs. Previews read the loop and never write to it, so the latents
with and without previews must be bit-identical; the demo's last-step preview is the exact decode
of the final latents, so it must equal the pass's image byte for byte; a resumed pass's replayed
steps have vanilla's latents bit for bit, so their previews are vanilla's.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import pytest

from app.engine import events as ev
from app.engine.engine import Engine
from app.engine.request import make_request
from app.gate import Decision

STEPS = 12
# On the demo at 12 steps this threshold first skips at step 8 (pattern FCCCCCCCSCCF, measured
# here on CPU and asserted below), so a resumed pass replays steps 0–6.
LATE_SKIP_THRESHOLD = 0.03


@pytest.fixture
def engine(demo_pipeline: Any) -> Engine:
    return Engine(loader=lambda *_: demo_pipeline)


def _request(threshold: float = 0.1, **kw: Any) -> Any:
    return make_request("demo", "red circle", steps=STEPS, threshold=threshold, **kw)


def _run(engine: Engine, request: Any) -> list[Any]:
    seen: list[Any] = []
    engine.run(1, request, seen.append, threading.Event())
    assert isinstance(seen[-1], ev.RunFinished), seen[-1]
    return seen


def _previews(seen: list[Any], which: ev.Pass) -> list[ev.StepPreview]:
    return [e for e in seen if isinstance(e, ev.StepPreview) and e.which is which]


def test_previews_off_emit_nothing_and_on_change_no_number(engine: Engine) -> None:
    off = _run(engine, _request(previews=False))
    engine.close()  # no cached vanilla: both runs compute both passes
    on = _run(engine, _request(previews=True))
    assert not any(isinstance(e, ev.StepPreview) for e in off)
    off_report, on_report = off[-1].report, on[-1].report
    assert on_report.gated.skipped > 0  # engagement: skipped steps were previewed too
    assert on_report.gated.latents_sha256 == off_report.gated.latents_sha256
    assert on_report.vanilla is not None and off_report.vanilla is not None
    assert on_report.vanilla.latents_sha256 == off_report.vanilla.latents_sha256
    assert np.array_equal(on_report.gated.image, off_report.gated.image)


def test_one_preview_per_step_each_after_its_step_with_its_decision(engine: Engine) -> None:
    seen = _run(engine, _request(previews=True))
    report = seen[-1].report
    for which, result in ((ev.Pass.vanilla, report.vanilla), (ev.Pass.gated, report.gated)):
        frames = _previews(seen, which)
        assert [f.index for f in frames] == list(range(STEPS))
        assert [f.decision for f in frames] == [s.decision for s in result.steps]
        # The last step lands on σ = 0: the demo's preview is the pass's image, byte for byte.
        assert np.array_equal(frames[-1].image, result.image)
        assert all(f.image.dtype == np.uint8 and f.image.flags.c_contiguous for f in frames)
        for frame in frames:  # each preview follows its own step's StepDone
            done = next(
                i
                for i, e in enumerate(seen)
                if isinstance(e, ev.StepDone) and e.which is which and e.step.index == frame.index
            )
            assert seen.index(frame) > done
        # previews arrive a step late (picked up asynchronously), but all before the pass ends
        finished = next(
            i for i, e in enumerate(seen) if isinstance(e, ev.PassFinished) and e.which is which
        )
        assert seen.index(frames[-1]) < finished
    assert any(f.decision is Decision.skipped for f in _previews(seen, ev.Pass.gated))


def test_a_cached_vanilla_replays_its_previews(engine: Engine) -> None:
    first = _run(engine, _request(0.1, previews=True))
    again = _run(engine, _request(0.2, previews=True))
    assert again[-1].report.vanilla_cached
    before, after = _previews(first, ev.Pass.vanilla), _previews(again, ev.Pass.vanilla)
    assert [f.index for f in after] == list(range(STEPS))
    assert all(np.array_equal(a.image, b.image) for a, b in zip(after, before, strict=True))


def test_a_vanilla_cached_without_previews_runs_again_to_show_them(engine: Engine) -> None:
    _run(engine, _request(0.1, previews=False))
    seen = _run(engine, _request(0.2, previews=True))
    assert not seen[-1].report.vanilla_cached
    assert len(_previews(seen, ev.Pass.vanilla)) == STEPS


def test_resumed_pass_shows_vanillas_previews_for_the_replayed_steps(
    engine: Engine, demo_pipeline: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    full = _run(engine, _request(LATE_SKIP_THRESHOLD, previews=True))
    decoded: list[int] = []
    own = demo_pipeline.decode_preview

    def counting(latents: Any, height: int, width: int) -> np.ndarray:
        decoded.append(1)
        return own(latents, height, width)

    monkeypatch.setattr(demo_pipeline, "decode_preview", counting, raising=False)
    resumed = _run(engine, _request(LATE_SKIP_THRESHOLD, previews=True, resume=True))
    report = resumed[-1].report
    assert report.gated.pattern == full[-1].report.gated.pattern == "FCCCCCCCSCCF"
    until = report.gated.resumed_from
    assert until == 7  # replayed 0–6, re-seeded at 7
    assert len(decoded) == STEPS - until  # replayed steps reuse vanilla's, decode nothing
    vanilla = _previews(full, ev.Pass.vanilla)
    gated_full, gated_resumed = _previews(full, ev.Pass.gated), _previews(resumed, ev.Pass.gated)
    assert [f.index for f in gated_resumed] == list(range(STEPS))
    for i in range(until):
        assert np.array_equal(gated_resumed[i].image, vanilla[i].image)
    # Every step, replayed or run, shows what the full gated pass showed.
    for a, b in zip(gated_resumed, gated_full, strict=True):
        assert np.array_equal(a.image, b.image)
