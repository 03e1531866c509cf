"""ERNIE-Image, ERNIE-Image Turbo and Lens Turbo open in the window without their weights, as
issue #29's models do (tests/ui/test_ui_this_years_models.py's checks, run on these variants):
the download badge and line (Lens says its licence is not known here before the first byte),
the first-block probe as their gate, the Download button, an offline download failing in one
sentence, and the quantization picker with each level's memory (Lens's pre-quantized encoder
stays as it is at every level)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pytestqt.qtbot import QtBot
from test_ui_this_years_models import (
    test_a_model_of_this_year_opens_without_its_weights as opens_without_its_weights,
)
from ui_support import WindowFactory

from app.variants import get_variant

# mflux imports FLUX.2's package from ERNIE-Image's weight definition; the window's engine thread
# imports it too at start (its warm-up), and two threads importing it at once can fail either
# with "cannot import name 'Flux2KleinWeightDefinition' from partially initialized module" (1 in
# 12 fresh processes here: the studio's own race, reported, not this test's subject). Imported
# here first, on one thread.
get_variant("ernie-image").family.require_mflux().weight_definition()


@pytest.mark.parametrize("variant_id", ["ernie-image", "ernie-image-turbo", "lens-turbo"])
def test_the_model_opens_without_its_weights(
    variant_id: str,
    qtbot: QtBot,
    make_window: WindowFactory,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    opens_without_its_weights(variant_id, qtbot, make_window, tmp_path, monkeypatch)


def test_lens_says_its_licence_and_its_other_repositories() -> None:
    lens = get_variant("lens-turbo")
    assert lens.licence_note is not None and "not known here" in lens.licence_note
    assert any("mlx-community/gpt-oss-20b-MXFP4-Q8" in note for note in lens.notes)
    # the pre-quantized encoder's 11.45 GB, counted as 16-bit parameters, at every level
    encoder_gb = lens.unquantized_billion * 2e9 / 2**30
    assert lens.weights_gb(4) > encoder_gb > lens.weights_gb(None) / 2
