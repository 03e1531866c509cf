"""FIBO, FIBO Lite and FIBO 2 in the window: they open without their weights as issue #29's
models do (download line and licence step, the probe as their gate, memory per quantization, an
offline download failing in one sentence), and the window says what their prompts are (FIBO: JSON
captions only; FIBO 2: a caption or plain text), offers mflux's example caption, and refuses a
prompt the family cannot read in one sentence before a run starts."""

from __future__ import annotations

from pathlib import Path

import pytest
from pytestqt.qtbot import QtBot
from ui_support import WindowFactory

from app.families import fibo2
from app.families.fibo import MFLUX_EXAMPLE_CAPTION, PROMPT_FORMAT
from tests.ui.test_ui_this_years_models import (
    test_a_model_of_this_year_opens_without_its_weights as opens_without_its_weights,
)


@pytest.mark.parametrize("variant_id", ["fibo", "fibo-lite", "fibo2"])
def test_fibo_opens_without_its_weights(
    variant_id: str,
    qtbot: QtBot,
    make_window: WindowFactory,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    opens_without_its_weights(variant_id, qtbot, make_window, tmp_path, monkeypatch)


def test_the_window_says_fibo_reads_json_captions_and_offers_mflux_example(
    qtbot: QtBot, make_window: WindowFactory
) -> None:
    window = make_window()
    c = window.controls
    # A family that reads plain text says nothing and offers no example.
    assert window.form.variant.family.prompt_format is None
    assert not c.prompt_note.isVisible() and not c.example_button.isVisible()

    window.form.select_variant("fibo")
    assert c.prompt_note.isVisible() and c.prompt_note.text() == PROMPT_FORMAT.note
    assert c.example_button.isVisible()
    # A plain-text prompt is refused in the request check's one sentence; nothing runs.
    window.form.prompt = "a red circle on a blue background"
    assert window.session.generate() is None
    error = window.run.error
    assert error is not None and "JSON caption" in error.message and "\n" not in error.message
    # Example puts mflux's caption in the prompt box, which FIBO reads.
    c.example_button.click()
    assert window.form.prompt == MFLUX_EXAMPLE_CAPTION
    assert c.prompt.toPlainText() == MFLUX_EXAMPLE_CAPTION
    assert window.form.request().prompt == MFLUX_EXAMPLE_CAPTION.strip()

    window.form.select_variant("demo")
    assert not c.prompt_note.isVisible() and not c.example_button.isVisible()


def test_fibo2_takes_plain_text_and_refuses_a_broken_caption(
    qtbot: QtBot, make_window: WindowFactory
) -> None:
    window = make_window()
    c = window.controls
    window.form.select_variant("fibo2")
    assert c.prompt_note.text() == fibo2.PROMPT_FORMAT.note and c.example_button.isVisible()
    window.form.prompt = "a red circle on a blue background"
    assert window.form.request().prompt == "a red circle on a blue background"
    window.form.prompt = '{"short_description": "a cat",'
    assert window.session.generate() is None
    error = window.run.error
    assert error is not None and "not valid JSON" in error.message
    c.example_button.click()
    assert window.form.prompt == MFLUX_EXAMPLE_CAPTION
