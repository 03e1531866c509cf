"""The seed box takes the engine's seeds, whole (issue #39, finding 1).

The window's box was a 32-bit signed QSpinBox (0–2147483647) while ``generate --seed`` takes
0–4294967295; typing 3000000000 kept 300000000 (the refused last digit), and that ran and was saved.
"""

from __future__ import annotations

import random

import pytest
from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot
from ui_support import WindowFactory

from app.engine.request import SEED_RANGE, RequestError, make_request


def _type(qtbot: QtBot, box, text: str) -> None:  # type: ignore[no-untyped-def]
    box.setFocus()
    box.selectAll()
    qtbot.keyClicks(box, text)
    qtbot.keyClick(box, Qt.Key.Key_Return)


def test_the_engine_takes_its_range_and_refuses_past_it() -> None:
    low, high = SEED_RANGE
    assert make_request("demo", "a red circle", seed=high).seed == high
    assert make_request("demo", "a red circle", seed=low).seed == low
    with pytest.raises(RequestError, match=f"seed must be between {low} and {high}"):
        make_request("demo", "a red circle", seed=high + 1)


def test_the_seed_box_takes_the_engines_range(make_window: WindowFactory) -> None:
    seed = make_window().controls.seed
    assert (seed.minimum(), seed.maximum()) == SEED_RANGE


def test_a_seed_past_32_bits_signed_is_kept_whole(qtbot: QtBot, make_window: WindowFactory) -> None:
    window = make_window()
    _type(qtbot, window.controls.seed, "3000000000")
    assert window.form.seed == 3_000_000_000
    assert window.form.request().seed == 3_000_000_000  # what runs and is saved
    assert not window.controls.seed_note.isVisible()


def test_a_seed_out_of_range_is_refused_whole_and_said(
    qtbot: QtBot, make_window: WindowFactory
) -> None:
    window = make_window()
    c = window.controls
    window.form.seed = 42
    _type(qtbot, c.seed, "5000000000")
    assert c.seed_note.isVisible()
    assert c.seed_note.text() == (
        f"The seed must be between 0 and {SEED_RANGE[1]}; 5000000000 is outside it."
    )
    assert window.form.seed == 42  # refused whole: never 500000000, the digits that fit
    assert c.seed.text() == "42"


def test_a_random_seed_can_be_any_seed_the_engine_takes(make_window: WindowFactory) -> None:
    window = make_window()
    random.seed(39)
    seeds = []
    for _ in range(64):
        window.controls.random_seed.click()
        seeds.append(window.form.seed)
    assert all(SEED_RANGE[0] <= s <= SEED_RANGE[1] for s in seeds)
    assert max(seeds) > 2**31 - 1  # the upper half, out of the old box's reach
