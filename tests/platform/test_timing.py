"""`platform.timing.Timed`: the times both training loops report, and the rates from them."""

from __future__ import annotations

import math

import pytest

from jaxrl_fast.platform.timing import Timed


class _Lanes(Timed):
    @property
    def lanes(self) -> int:
        return 4


def _times(cls=Timed, **changes):
    times = dict(env_steps=1_000, compile_time_s=3.0, run_time_s=2.0, eval_time_s=0.5,
                 wall_time_s=6.0)  # fmt: skip
    return cls(**{**times, **changes})


def test_the_rate_counts_the_steps_this_call_ran_over_every_lane():
    assert _times().env_steps_per_s == pytest.approx(500.0)
    assert _times(_Lanes).env_steps_per_s == pytest.approx(2_000.0)
    resumed = _times(_Lanes, resumed_env_steps=600)
    assert resumed.env_steps_run == 400 and resumed.env_steps_per_s == pytest.approx(800.0)
    assert math.isnan(_times(resumed_env_steps=1_000).env_steps_per_s)  # a finished run resumed


def test_timings_are_json_ready_and_keyword_only():
    assert _times(resumed_env_steps=200).timings() == {
        "wall_time_s": 6.0, "compile_time_s": 3.0, "run_time_s": 2.0, "eval_time_s": 0.5,
        "env_steps_run": 800, "resumed_env_steps": 200,
    }  # fmt: skip
    with pytest.raises(TypeError):
        Timed(1_000, 3.0, 2.0, 0.5, 6.0)
