"""Issue #29's models open in the window without their weights: the variant picker's download
badge, the sidebar's not-downloaded line (and the licence step of a gated repo), the gate they
open on (the first-block probe: none of them has TeaCache numbers), the Download button, an
offline download failing in one sentence, and the quantization picker with each level's memory.
The model store is the real one against the Hugging Face client offline (``HF_HUB_OFFLINE=1``,
an empty cache): what a user without network sees."""

from __future__ import annotations

from pathlib import Path

import pytest
from pytestqt.qtbot import QtBot
from ui_support import SIGNAL_TIMEOUT_MS, WindowFactory

from app.ui.downloads import DefaultModelStore, format_bytes
from app.ui.form_model import ui_default_threshold
from app.variants import QUANTIZE_LEVELS, get_variant

THIS_YEARS = [
    "flux3-image-klein",
    "flux3-image-klein-base",
    "qwen-image-2.1",
    "qwen-image-2.1-turbo",
    "krea-2",
]


@pytest.mark.parametrize("variant_id", THIS_YEARS)
def test_a_model_of_this_year_opens_without_its_weights(
    variant_id: str,
    qtbot: QtBot,
    make_window: WindowFactory,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    variant = get_variant(variant_id)
    store = DefaultModelStore()
    window = make_window(store=store)
    size = format_bytes(store.download_size(variant))
    badge = window.controls.variant_picker.badge_of(variant_id)
    assert badge == ("distilled · " if variant.distilled else "") + f"≈{size} ↓"

    window.form.select_variant(variant_id)
    assert window.form.variant_id == variant_id
    info = window.controls.variant_info.text()
    assert info.startswith(f"Not downloaded · {size}")
    assert ("licence to accept on Hugging Face first" in info) == variant.gated_repo
    licensed = variant.licence is not None and not variant.gated_repo  # Qwen-Image 2.1's
    assert (f"under the {variant.licence}" in info) == licensed
    assert ("distilled" in info.split(" · ")) == variant.distilled
    assert f"{variant.default_steps} steps by default" in info

    # The gate: the first-block probe, with the one line why; TeaCache and MagCache need a
    # calibration first (README, "This year's models": the probe is their default gate).
    picker = window.controls.gate_picker
    assert window.form.gate == "firstblock" and picker.current_gate() == "firstblock"
    assert window.form.threshold == ui_default_threshold(variant, "firstblock")
    assert window.form.gate_note == (
        f"{variant.display_name} has no TeaCache calibration, so the First-block probe (which "
        "needs none) is the default"
    )
    assert window.controls.calibration.text() == window.form.gate_note
    assert not picker.is_enabled("teacache") and not picker.is_enabled("magcache")
    assert window.controls.download_button.isVisible()
    assert window.controls.download_button.text() == f"Download ({size})"

    # Memory and quantization: every level listed with this variant's own estimate.
    quantize = window.controls.quantize
    assert quantize.isVisible()
    items = [quantize.combo.itemText(i) for i in range(quantize.combo.count())]
    levels = [None, *sorted(QUANTIZE_LEVELS, reverse=True)]
    assert len(items) == len(levels)
    for text, level in zip(items, levels, strict=True):
        bits = "16-bit" if level is None else f"{level}-bit"
        gb = variant.memory_estimate_gb(level, window.form.size)
        assert text.startswith(f"{bits} · up to {gb:.0f} GB"), (text, gb)
    # Qwen-Image 2.1's and Krea 2's text encoders stay at 16 bits: 4-bit saves less than 4×.
    if variant.unquantized_billion:
        assert variant.weights_gb(4) > variant.weights_gb(None) / 4

    # Offline: the download fails in one sentence that names the model; nothing else breaks.
    with qtbot.waitSignal(window.downloads.failed, timeout=SIGNAL_TIMEOUT_MS):
        window.controls.download_button.click()
    error = window.run.error
    assert error is not None
    assert variant.display_name in error.message and "HF_HUB_OFFLINE" in error.message
    assert "\n" not in error.message and "Traceback" not in error.message
    assert window.controls.download_button.isVisible()
    assert window.session.generate() is None  # no weights: a notice, not a run
