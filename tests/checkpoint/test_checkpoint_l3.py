"""Runs with the L3 tier (host RAM and disk) checkpoint its host arrays and resume bitwise."""

from __future__ import annotations

import os

import numpy as np
import pytest
from conftest import StopRun, params_hashes, stop_at, tiny_config

from jaxrl_fast.run.train import train


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["host", "disk"])
def test_an_l3_run_stopped_and_resumed_ends_bitwise_where_the_whole_run_does(kind, tmp_path):
    replay = dict(capacity=160, l3=kind, l3_capacity=800, l3_share=0.25, spill_block=4096)
    if kind == "disk":
        replay["spill_dir"] = str(tmp_path)
    cfg = tiny_config(total_env_steps=1_680, replay=replay)  # 4 chunks of 400 env steps
    whole = train(cfg, progress=False, run_dir=tmp_path / "whole", checkpoint_every=400)
    spilled = whole.history[1]["replay"]["blocks_spilled"]
    assert spilled > 0  # L3 holds rows by the checkpoint the resume starts from
    with pytest.raises(StopRun):  # dies while logging chunk 2: chunks 0 and 1 are saved
        train(cfg, progress=False, run_dir=tmp_path / "cut", checkpoint_every=400,
              on_chunk=stop_at(2))  # fmt: skip
    assert sorted(os.listdir(tmp_path / "cut" / "checkpoints")) == ["1", "2"]
    l3_item = tmp_path / "cut" / "checkpoints" / "2" / "l3"
    assert l3_item.is_dir() and any(l3_item.iterdir())  # the host arrays are in the checkpoint
    resumed = train(cfg, progress=False, run_dir=tmp_path / "cut", resume=True,
                    checkpoint_every=400)  # fmt: skip
    assert params_hashes(tmp_path / "cut") == params_hashes(tmp_path / "whole")
    for a, b in zip(resumed.history, whole.history, strict=True):
        assert a["replay"] == b["replay"] and a["loss"] == b["loss"]
    np.testing.assert_array_equal(resumed.final_return, whole.final_return)
