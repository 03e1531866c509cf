"""What a gate kind reads from the gated step. Its own module, below both the kinds and the live
gates, so that neither imports the other for it."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Signal(StrEnum):
    """What a kind's live gate decides on each step (``GateKind.signal``): the step builds it only
    for a kind that asks, so an unread signal costs nothing."""

    none = "none"  # decides from a table and the step index (MagCache)
    modulated_input = "modulated-input"  # the family's signal before the stack (TeaCache)
    # The change of the stack's first blocks on the image tokens: the step splits the stack after
    # them and decides there (the first-block probe).
    first_block_residual = "first-block-residual"


class Tap(StrEnum):
    """A value the one gated step (``app.adapters.step``) can hand a gate, on any family."""

    # The family's signal before the stack (its anatomy's ``signal``; TeaCache's).
    modulated_input = "modulated-input"
    # The first ``Taps.split`` blocks' change of the image tokens (the first-block probe's).
    block_residual = "block-residual"
    # The stack's residual over the tokens the tail reads: what a skipped step adds (every gate
    # keeps it; an observer measures its magnitude ratio, MagCache's trace).
    body_residual = "body-residual"
    # The model's output for the step (calibration pairs).
    output = "output"


# The tap a kind's decision reads, by its ``Signal``.
DECIDES_ON: dict[Signal, Tap | None] = {
    Signal.none: None,
    Signal.modulated_input: Tap.modulated_input,
    Signal.first_block_residual: Tap.block_residual,
}


@dataclass(frozen=True, slots=True)
class Taps:
    """What a live gate asks of the gated step, on the conditional branch of each step.

    ``decides_on``: the tap ``decide`` reads (None: it decides before any is built, from a table).
    ``records``: taps an observer traces besides (handed to ``LiveGate.record_tap``).
    ``split``: the blocks run before the decision (the block residual's depth; 0: none).
    ``residual_from``: where the cached residual starts (0: the stack's input; ``split``: after
    the blocks the decision ran, so a skipped step adds only the rest's change)."""

    decides_on: Tap | None
    records: frozenset[Tap] = frozenset()
    split: int = 0
    residual_from: int = 0

    def wants(self, tap: Tap) -> bool:
        return tap is self.decides_on or tap in self.records
