"""The comparison's inputs: the checks (one sentence each) and the default thresholds."""

from __future__ import annotations

import pytest

from app.engine.comparison import (
    ThresholdComparison,
    check_thresholds,
    default_thresholds,
    parse_thresholds,
)
from app.engine.request import RequestError, make_request
from app.gate import skip_curve
from app.variants import get_variant
from tests.fakes.engine import default_trace
from tests.fakes.params import teacache_params


def test_parse_accepts_commas_spaces_and_semicolons_and_sorts() -> None:
    assert parse_thresholds(" 0.3, 0.05;0.2  0.1 ") == (0.05, 0.1, 0.2, 0.3)
    assert parse_thresholds("0, 0.5, 1, 0.25") == (0.0, 0.25, 0.5, 1.0)


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ((0.1, 0.2, 0.3), "compare 4 to 8 thresholds, got 3"),
        (tuple(i / 10 for i in range(9)), "compare 4 to 8 thresholds, got 9"),
        ((0.1, 0.2, -0.1, 0.3), "threshold -0.1 is outside 0 to 1"),
        ((0.1, 0.2, float("nan"), 0.3), "threshold nan is outside 0 to 1"),
        ((0.1, 0.1, 0.2, 0.3), "threshold 0.1 appears twice"),
    ],
)
def test_check_says_what_is_wrong(values: tuple[float, ...], message: str) -> None:
    with pytest.raises(RequestError, match=message.replace("(", r"\(")):
        check_thresholds(values)


def test_the_comparison_resumes_every_pass_from_one_vanilla() -> None:
    base = make_request("demo", "a red circle on a blue background", steps=12, threshold=0.1)
    comparison = ThresholdComparison(base, (0.3, 0.1, 0.05, 0.2))
    assert comparison.thresholds == (0.05, 0.1, 0.2, 0.3)
    requests = comparison.requests()
    assert [r.threshold for r in requests] == [0.05, 0.1, 0.2, 0.3]
    assert all(r.resume and r.compare_vanilla for r in requests)
    assert len({r.vanilla_key() for r in requests}) == 1
    with pytest.raises(RequestError):
        ThresholdComparison(base, (0.1, 0.2))


def test_defaults_without_a_trace_spread_around_the_variant_default() -> None:
    demo = get_variant("demo")
    values = default_thresholds(demo, 28)
    assert len(values) == 6 and demo.default_threshold in values
    assert values == tuple(sorted(set(values))) and all(0 < v <= 1 for v in values)
    assert min(values) < demo.default_threshold < max(values)
    near_one = default_thresholds(demo, 28, around=0.9)
    assert 4 <= len(near_one) <= 8 and 0.9 in near_one and max(near_one) <= 1.0
    turbo = get_variant("demo-turbo")  # distilled: no default; centred above its floor
    assert turbo.min_predicted_change is not None
    assert max(default_thresholds(turbo, 4)) > turbo.min_predicted_change


def test_defaults_from_a_trace_each_skip_a_different_number_of_steps() -> None:
    demo = get_variant("demo")
    request = make_request("demo", "a red circle on a blue background", steps=28)
    trace = default_trace(request)
    values = default_thresholds(demo, 28, trace, around=0.1)
    assert len(values) == 6
    skips = [n for _t, n, _p in skip_curve(teacache_params(demo, 0.1), trace, values)]
    assert len(set(skips)) == len(skips) and min(skips) > 0  # all distinct, all engage
    _t, around, _p = skip_curve(teacache_params(demo, 0.1), trace, [0.1])[0]
    assert around in skips  # the user's threshold's band is among them


def test_magcache_defaults_each_skip_a_different_number_of_steps() -> None:
    from app.gate import Decision
    from app.gate.kinds import gate_kind

    simulate_gate = gate_kind("magcache").simulate

    demo = get_variant("demo")
    around = demo.default_threshold_for("magcache")
    assert around is not None
    values = default_thresholds(demo, 28, around=around, gate="magcache")
    params = demo.params_for("magcache", around)

    def skips(threshold: float) -> int:
        verdicts = simulate_gate(params.with_threshold(threshold), [None] * 28)
        return sum(v.decision is Decision.skipped for v in verdicts)

    counts = [skips(t) for t in values]
    assert len(values) == 6
    assert len(set(counts)) == len(counts) and min(counts) > 0  # all distinct, all engage
    assert skips(around) in counts  # the user's threshold's band is among them
    # Not TeaCache's picks: those are on another scale.
    assert values != default_thresholds(demo, 28, around=around)
