"""What a gate kind reads from the adapter on each step. Its own module, below both the kinds and
the live gates, so that neither imports the other for it."""

from __future__ import annotations

from enum import StrEnum


class Signal(StrEnum):
    """What a kind's live gate reads from the adapter on each step: the adapter builds it only
    for a kind that asks (``LiveGate.needs_signal``), so an unread signal costs nothing."""

    none = "none"  # decides from a table and the step index (MagCache)
    modulated_input = "modulated-input"  # the family's signal before block 0 (TeaCache)
    # The first block's residual on the image stream: the adapter splits its stack after the
    # first block and decides there (the first-block probe; ``LiveGate.probes_first_block``).
    first_block_residual = "first-block-residual"
