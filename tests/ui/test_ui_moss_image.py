"""MOSS-Image SFT and Base open in the window without their weights, offline: the test of issue
#29's models (tests/ui/test_ui_this_years_models.py: the download badge and line, the first-block
probe with the one line why, the Download button, an offline download failing in one sentence,
every quantization level with its memory, the text encoder quantized with the rest) on
MOSS-Image's rows, until the family kit lets that file read every family's variants."""

from __future__ import annotations

from pathlib import Path

import pytest
from pytestqt.qtbot import QtBot
from ui_support import WindowFactory

import tests.ui.test_ui_this_years_models as this_years

MOSS_IMAGE = ["moss-image-sft", "moss-image-base"]


@pytest.mark.parametrize("variant_id", MOSS_IMAGE)
def test_moss_image_opens_without_its_weights(
    variant_id: str,
    qtbot: QtBot,
    make_window: WindowFactory,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    this_years.test_a_model_of_this_year_opens_without_its_weights(
        variant_id, qtbot, make_window, tmp_path, monkeypatch
    )
