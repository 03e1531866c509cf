"""Settings: typed, tolerant per key, corrupt files fall back to defaults with a warning."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app import paths
from app.storage.settings import PROMPT_HISTORY_LIMIT, Settings, SettingsStore


def test_defaults_when_the_file_is_missing(tmp_path: Path) -> None:
    store = SettingsStore(tmp_path / "settings.json")
    assert store.load() == Settings()
    assert store.warnings == []


def test_default_location_follows_the_app_paths() -> None:
    assert SettingsStore().path == paths.settings_file()


def test_round_trip(tmp_path: Path) -> None:
    store = SettingsStore(tmp_path / "nested" / "settings.json")
    settings = Settings(
        last_variant="demo-turbo",
        last_prompt="a red star",
        prompt_history=["a red star", "two blue circles"],
        thresholds={"demo": 0.125},
        steps={"demo": 30},
        sizes={"demo": [128, 128]},
        guidance={"demo": 2.5},
        loras={"flux2-klein-base-4b": [["/loras/ink.safetensors", 0.8]]},
        seed=2**32 - 1,
        rerun_on_threshold_change=True,
        details_expanded=True,
    )
    store.save(settings)
    assert store.load() == settings
    assert store.warnings == []
    assert json.loads(store.path.read_text())["format"] == 2


def test_save_is_atomic_and_leaves_no_temporary_files(tmp_path: Path) -> None:
    store = SettingsStore(tmp_path / "settings.json")
    store.save(Settings(seed=1))
    store.save(Settings(seed=2))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["settings.json"]
    assert store.load().seed == 2


@pytest.mark.parametrize(
    "text",
    ["{not json", "", "[1, 2, 3]", '"just a string"', "\x00\x01"],
    ids=["broken-json", "empty", "list", "string", "binary"],
)
def test_corrupt_file_falls_back_to_defaults_with_a_warning(tmp_path: Path, text: str) -> None:
    path = tmp_path / "settings.json"
    path.write_text(text)
    store = SettingsStore(path)
    assert store.load() == Settings()
    assert len(store.warnings) == 1


def test_unreadable_bytes_fall_back_to_defaults(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    path.write_bytes(b"\xff\xfe\xfa")
    store = SettingsStore(path)
    assert store.load() == Settings()
    assert store.warnings


def test_bad_keys_fall_back_one_by_one(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    path.write_text(
        json.dumps(
            {
                "last_variant": "demo-turbo",  # good
                "seed": -5,  # out of range
                "thresholds": {"demo": 1.5},  # out of range
                "steps": {"demo": 12},  # good
                "prompt_history": ["ok", 3],  # wrong element type
                "sizes": {"demo": [128]},  # not a pair
                "rerun_on_threshold_change": "yes",  # not a bool
                "details_expanded": 1,  # not a bool either
                "guidance": {"demo": True},  # a bool is not a number
                "loras": {"flux1-dev": [["/a.safetensors", 9.0]]},  # scale out of range
                "unknown_key": 1,  # ignored silently
            }
        )
    )
    store = SettingsStore(path)
    settings = store.load()
    defaults = Settings()
    assert settings.last_variant == "demo-turbo"
    assert settings.steps == {"demo": 12}
    assert settings.seed == defaults.seed
    assert settings.thresholds == defaults.thresholds
    assert settings.prompt_history == defaults.prompt_history
    assert settings.sizes == defaults.sizes
    assert settings.rerun_on_threshold_change is defaults.rerun_on_threshold_change
    assert settings.details_expanded is defaults.details_expanded is False
    assert settings.guidance == defaults.guidance
    assert settings.loras == defaults.loras
    flagged = {w.split("'")[1] for w in store.warnings}
    assert flagged == {
        "seed",
        "thresholds",
        "prompt_history",
        "sizes",
        "rerun_on_threshold_change",
        "details_expanded",
        "guidance",
        "loras",
    }


def test_prompt_history_is_newest_first_deduplicated_and_bounded() -> None:
    settings = Settings()
    for i in range(PROMPT_HISTORY_LIMIT + 5):
        settings.remember_prompt(f"prompt {i}")
    settings.remember_prompt("prompt 3")
    settings.remember_prompt("   ")
    assert settings.prompt_history[0] == "prompt 3"
    assert len(settings.prompt_history) == PROMPT_HISTORY_LIMIT
    assert len(set(settings.prompt_history)) == PROMPT_HISTORY_LIMIT
    assert settings.last_prompt == "prompt 3"


def test_an_overlong_prompt_history_is_trimmed_on_load(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    path.write_text(json.dumps({"prompt_history": [f"p{i}" for i in range(50)]}))
    assert len(SettingsStore(path).load().prompt_history) == PROMPT_HISTORY_LIMIT


def test_a_format_1_file_forgets_the_demo_defaults_of_its_day(tmp_path: Path) -> None:
    """Format 1 stored every value, defaults included: the demo's old threshold 0.0125 and
    guidance 1 would otherwise outlive its recalibration. Chosen values stay."""
    path = tmp_path / "settings.json"
    path.write_text(
        json.dumps(
            {
                "format": 1,
                "thresholds": {"demo": 0.0125, "demo-turbo": 0.1, "flux1-dev": 0.3},
                "steps": {"demo": 28, "demo-turbo": 6},
                "guidance": {"demo": 1.0, "flux1-dev": 4.0},
                "seed": 7,
            }
        )
    )
    store = SettingsStore(path)
    settings = store.load()
    assert settings.thresholds == {"flux1-dev": 0.3}
    assert settings.steps == {"demo-turbo": 6}  # 6 was never a default: the user chose it
    assert settings.guidance == {"flux1-dev": 4.0}
    assert settings.seed == 7
    assert store.warnings == []
    store.save(settings)
    assert json.loads(path.read_text())["format"] == 2


def test_a_current_file_keeps_a_value_equal_to_an_old_default(tmp_path: Path) -> None:
    # Since format 2 only chosen values are written, so 0.0125 here is the user's.
    path = tmp_path / "settings.json"
    path.write_text(json.dumps({"format": 2, "thresholds": {"demo": 0.0125}}))
    assert SettingsStore(path).load().thresholds == {"demo": 0.0125}
