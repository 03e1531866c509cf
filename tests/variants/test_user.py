"""User calibrations: saved in the user data folder, offered by the registry as their own ids."""

from __future__ import annotations

import json
from typing import Any

import pytest

from app.engine.request import RequestError, make_request
from app.variants import UnknownVariantError, get_variant
from app.variants import user as store

COEFFICIENTS = [1.5, -2.0, 0.5, 0.8, 0.0]


def document(**overrides: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "base_variant": "demo",
        "name": "mycal",
        "coefficients": COEFFICIENTS,
        "calibrated_range": [0.01, 0.4],
        "default_threshold": 0.15,
        "provenance": {
            "source": "test",
            "fit_metric": "R²",
            "fit_value": 0.9,
            "data_size": "12 pairs",
        },
    }
    data.update(overrides)
    return data


def test_saved_calibration_is_a_selectable_variant() -> None:
    path = store.save_calibration(document())
    assert path == store.calibrations_dir() / "demo+mycal.json"
    assert path.parent.parent.name == "data"  # under app.paths.data_dir() (TEACACHE_STUDIO_HOME)
    variant = get_variant("demo+mycal")
    base = get_variant("demo")
    assert variant.id == "demo+mycal"
    assert variant.coefficients == tuple(COEFFICIENTS)
    assert variant.calibrated_range == (0.01, 0.4)
    assert variant.default_threshold == 0.15
    assert variant.provenance.fit_value == 0.9
    assert variant.family is base.family and variant.default_steps == base.default_steps
    assert "mycal" in variant.display_name
    assert [v.id for v in store.user_variants()] == ["demo+mycal"]
    request = make_request("demo+mycal", "a red circle on a blue background")
    assert request.variant_id == "demo+mycal" and request.threshold == 0.15


def test_unknown_ids_still_fail_clearly() -> None:
    with pytest.raises(UnknownVariantError, match="unknown variant"):
        get_variant("demo+absent")
    with pytest.raises(UnknownVariantError):
        get_variant("nothing+mycal")  # no such base
    with pytest.raises(RequestError, match="unknown variant"):
        make_request("demo+absent", "a red circle")


def test_corrupt_file_is_one_clear_error_and_skipped_in_listing() -> None:
    store.save_calibration(document(name="good"))
    bad = store.calibrations_dir() / "demo+bad.json"
    bad.write_text(json.dumps(document(name="bad", coefficients=[1, 2])), encoding="utf-8")
    with pytest.raises(UnknownVariantError, match="not a usable calibration"):
        get_variant("demo+bad")
    with pytest.raises(RequestError, match=r"demo\+bad\.json"):
        make_request("demo+bad", "a red circle")
    assert [v.id for v in store.user_variants()] == ["demo+good"]


@pytest.mark.parametrize("name", ["", "Upper", "has space", "a/b", "x" * 41, "-lead"])
def test_names_are_plain(name: str) -> None:
    with pytest.raises(ValueError, match="calibration name"):
        store.validate_name(name)


def test_invalid_documents_are_refused_before_writing() -> None:
    with pytest.raises(store.CalibrationFileError):
        store.save_calibration(document(provenance={"unknown_key": 1}))
    with pytest.raises(store.CalibrationFileError):
        store.save_calibration(document(default_threshold=3))
    assert not store.calibrations_dir().exists() or not list(store.calibrations_dir().glob("*"))


def test_delete() -> None:
    store.save_calibration(document())
    assert store.delete_calibration("demo+mycal")
    assert not store.delete_calibration("demo+mycal")
    with pytest.raises(UnknownVariantError):
        get_variant("demo+mycal")


def test_a_user_calibration_generates_and_is_listed_everywhere(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """End to end: the CLI lists it, and the engine runs it on the base model's weights with
    the user's polynomial (the report carries the user coefficients)."""
    import threading

    from app.cli.main import main
    from app.engine import events as ev
    from app.engine.engine import Engine

    store.save_calibration(document())
    assert main(["variants", "--json"]) == 0
    listed = [row["id"] for row in json.loads(capsys.readouterr().out)]
    assert listed[-1] == "demo+mycal" and "demo" in listed

    seen: list[Any] = []
    request = make_request("demo+mycal", "a red circle on a blue background", steps=6)
    Engine().run(1, request, seen.append, threading.Event())
    assert isinstance(seen[-1], ev.RunFinished), seen[-1]
    report = seen[-1].report.to_json()
    assert report["variant"] == "demo+mycal"
    fields = report["gate_fields"]  # each gate kind's own report fields, by kind
    assert isinstance(fields, dict) and fields["teacache"]["coefficients"] == COEFFICIENTS
