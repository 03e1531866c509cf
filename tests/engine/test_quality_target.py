"""A quality target's bounds (``app.engine.request.QualityTarget``): SSIM, the local difference
and SSIMULACRA2, each optional but one of the two scores, and a search's record round-tripped."""

from __future__ import annotations

import pytest

from app.engine.report import TargetProbe, TargetSearch, target_search_from_json
from app.engine.request import QualityTarget, RequestError, make_target


def test_each_bound_can_fail_the_target_alone() -> None:
    target = make_target(0.97, 0.25, 70.0)
    assert target.met_by(0.98, 0.1, 75.0)
    assert not target.met_by(0.96, 0.1, 75.0)  # SSIM under its bound
    assert not target.met_by(0.98, 0.3, 75.0)  # one spot beyond the local bound
    assert not target.met_by(0.98, 0.1, 65.0)  # SSIMULACRA2 under its bound
    assert not target.met_by(0.98, 0.1, None)  # a perceptual bound needs its measurement
    assert target.describe() == "SSIM ≥ 0.97 and SSIMULACRA2 ≥ 70 and local difference ≤ 0.25"


def test_a_perceptual_target_alone_sets_no_ssim_bound() -> None:
    target = make_target(None, None, 50.0)
    assert target.min_ssim is None and target.max_local_diff is None
    assert target.met_by(None, None, 51.0) and not target.met_by(0.999, 0.0, 49.0)
    assert target.describe() == "SSIMULACRA2 ≥ 50"


@pytest.mark.parametrize(
    ("ssim", "perceptual", "message"),
    [
        (None, None, "a minimum SSIM or a minimum SSIMULACRA2"),
        (None, 100.5, "a number up to 100"),
        (None, float("inf"), "a number up to 100"),
        (0.0, None, "above 0 and at most 1"),
    ],
)
def test_a_bad_target_is_one_sentence(
    ssim: float | None, perceptual: float | None, message: str
) -> None:
    with pytest.raises(RequestError, match=message):
        make_target(ssim, 0.25, perceptual)


def test_a_search_with_a_perceptual_bound_reads_back_whole() -> None:
    probe = TargetProbe(0.1, 9, "FCSCSCSF", 0.99, 0.05, True, 9, ssimulacra2=82.5)
    search = TargetSearch(QualityTarget(None, 0.1, min_ssimulacra2=80.0), (probe,), 0.1, True, "")
    again = target_search_from_json(search.to_json(), 0.1)
    assert again is not None
    assert again.target == search.target and again.probes == search.probes
