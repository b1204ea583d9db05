"""TensorBoard event files in run_dir/tb/ (tensorboardX), and the line shown without it."""

from __future__ import annotations

import glob
import os
import struct
import sys

import numpy as np
import pytest
from conftest import tiny_config

from jaxrl_fast.run.metrics import TensorBoard
from jaxrl_fast.run.train import train

pytest.importorskip("tensorboardX")


def _scalars(directory) -> dict[str, dict[int, float]]:
    """`tag -> {step: value}` from the event files under `directory`, oldest first (TFRecord
    framing: length, its crc, the Event proto, its crc), applying purges as TensorBoard does (a
    START session log at step k drops the earlier events at steps >= k)."""
    from tensorboardX.proto import event_pb2

    out: dict[str, dict[int, float]] = {}
    for path in sorted(
        glob.glob(f"{directory}/events.out.tfevents.*"), key=lambda p: (os.path.getmtime(p), p)
    ):
        data = open(path, "rb").read()
        pos = 0
        while pos < len(data):
            (length,) = struct.unpack("<Q", data[pos : pos + 8])
            event = event_pb2.Event.FromString(data[pos + 12 : pos + 12 + length])
            pos += 12 + length + 4
            if event.HasField("session_log") and event.session_log.status == 1:  # START: a purge
                for values in out.values():
                    for step in [s for s in values if s >= event.step]:
                        del values[step]
            for v in event.summary.value:
                out.setdefault(v.tag, {})[event.step] = v.simple_value
    return out


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    path = tmp_path_factory.mktemp("tb") / "run"
    return train(tiny_config(eval_every=400, eval_episodes=2), progress=False, run_dir=path), path


@pytest.mark.slow
def test_event_files_hold_each_chunks_metrics_per_seed_and_mean(run):
    result, path = run
    tags = _scalars(path / "tb")
    steps = [h["env_steps"] for h in result.history]
    assert sorted(tags["loss/mean"]) == steps == [280, 480, 680, 880]
    for h in result.history:
        for i in range(2):
            got = tags[f"loss/seed_{i}"][h["env_steps"]]
            assert got == pytest.approx(h["loss"][i], rel=1e-6)  # stored as float32
        assert tags["loss/mean"][h["env_steps"]] == pytest.approx(np.mean(h["loss"]), rel=1e-6)
    # evaluated chunks only
    assert sorted(tags["eval_return/mean"]) == [480, 880]
    assert tags["eval_return/seed_1"][880] == pytest.approx(result.final_return[1], rel=1e-6)
    assert "epsilon/mean" in tags and "learning_rate/seed_0" in tags


def test_without_tensorboardx_one_line_says_how_to_get_it(monkeypatch, tmp_path, capsys):
    monkeypatch.setitem(sys.modules, "tensorboardX", None)  # import raises ImportError
    tb = TensorBoard(str(tmp_path / "tb"))
    tb.log([{"chunk": 0, "seed_index": 0, "env_steps": 10, "loss": 1.0}])
    tb.close()
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "pip install 'jaxrl-fast[tb]'" in err
    assert not (tmp_path / "tb").exists()


def test_a_resumed_writer_purges_the_chunks_it_logs_again(tmp_path):
    rows = lambda step, v: [{"chunk": 0, "seed_index": 0, "env_steps": step, "loss": v}]  # noqa: E731
    first = TensorBoard(str(tmp_path))
    for step in (10, 20, 30):
        first.log(rows(step, float(step)))
    first.close()
    again = TensorBoard(str(tmp_path), resume=True)  # resumed after the chunk at step 10
    again.log(rows(20, -20.0))  # (and stopped again)
    again.close()
    assert len(glob.glob(f"{tmp_path}/events.out.tfevents.*")) == 2
    # the first writer's 20 and 30 are purged; a writer without purge_step would keep its 30
    assert _scalars(tmp_path)["loss/seed_0"] == {10: 10.0, 20: -20.0}
