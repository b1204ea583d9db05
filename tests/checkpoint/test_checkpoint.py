"""Checkpoints and exact resume: an interrupted run, resumed, ends bitwise where an
uninterrupted one does."""

from __future__ import annotations

import json
import math
import os

import jax
import pytest
from conftest import StopRun, tiny_config
from conftest import params_hashes as _hashes
from conftest import stop_at as _stop_at

from jaxrl_fast.run.train import train


def _rows(path):
    with open(os.path.join(path, "metrics.jsonl")) as f:
        return [(r["chunk"], r["seed_index"]) for r in map(json.loads, f)]


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    path = tmp_path_factory.mktemp("full")
    result = train(
        tiny_config(eval_episodes=2), progress=False, run_dir=path, checkpoint_every=200, keep=2
    )
    return result, path


@pytest.mark.slow
@pytest.mark.gpu
def test_resumed_run_ends_bitwise_where_the_uninterrupted_one_does(uninterrupted, tmp_path, capsys):
    full, full_path = uninterrupted
    cfg = full.config
    assert cfg.chunks == 4 and cfg.blocks_per_chunk * cfg.train_frequency == 200
    with pytest.raises(StopRun):  # dies while logging chunk 2: chunks 0 and 1 are saved
        train(cfg, progress=False, run_dir=tmp_path, checkpoint_every=200, on_chunk=_stop_at(2))
    assert sorted(os.listdir(tmp_path / "checkpoints")) == ["1", "2"]
    capsys.readouterr()
    resumed = train(cfg, progress=False, run_dir=tmp_path, resume=True, checkpoint_every=200)
    # said on stderr without a progress bar too: which checkpoint, after how many steps
    said = capsys.readouterr().err
    assert "resumed from the checkpoint after 2 of 4 chunks (480 env steps per seed): " in said
    assert said.rstrip().endswith(os.path.join(str(tmp_path), "checkpoints", "2"))
    assert _hashes(tmp_path) == _hashes(full_path)
    assert len(set(_hashes(tmp_path))) == 2  # the seeds differ
    assert resumed.final_return.tolist() == full.final_return.tolist()
    assert [h["env_steps"] for h in resumed.history] == [280, 480, 680, 880]
    assert _rows(tmp_path) == _rows(full_path) == [(c, s) for c in range(4) for s in range(2)]
    # its figures count what this call ran: 2 chunks (400 env steps per seed) after step 480
    assert (resumed.resumed_env_steps, resumed.env_steps_run, resumed.env_steps) == (480, 400, 880)
    lanes, run_s = cfg.num_lanes, resumed.run_time_s
    assert resumed.env_steps_per_s == pytest.approx(lanes * 400 / run_s)
    assert resumed.train_env_steps_per_s == pytest.approx(lanes * 400 / run_s)
    assert full.env_steps_per_s == pytest.approx(lanes * 880 / full.run_time_s)
    assert resumed.evaluations == full.evaluations == 1  # the final one


@pytest.mark.slow
def test_keep_bounds_the_checkpoints(uninterrupted):
    _, path = uninterrupted
    assert sorted(os.listdir(path / "checkpoints")) == ["3", "4"]  # keep=2 of 4 saves


@pytest.mark.slow
def test_resume_of_a_finished_run_only_evaluates(uninterrupted):
    full, path = uninterrupted
    before = _hashes(path)
    again = train(full.config, progress=False, run_dir=path, resume=True, checkpoint_every=200)
    assert _hashes(path) == before
    assert again.final_return.tolist() == full.final_return.tolist()
    assert len(again.history) == 4 and _rows(path) == [(c, s) for c in range(4) for s in range(2)]
    assert again.env_steps_run == 0 and math.isnan(again.env_steps_per_s)
    assert again.summary()["env_steps_per_s"] is None  # not a rate of 0 steps
    from jaxrl_fast.cli.main import timings_line

    assert "no env steps run (the run had finished)" in timings_line(again)
    assert "1 evaluation(s)" in timings_line(again)


@pytest.mark.slow
def test_resume_with_another_config_names_the_fields(uninterrupted):
    full, path = uninterrupted
    other = full.config.replace(dqn={"learning_rate": 5e-4}, seed=3)
    with pytest.raises(ValueError, match=r"differing fields: dqn\.learning_rate, seed\."):
        train(other, progress=False, run_dir=path, resume=True)


def test_bad_checkpoint_arguments_are_refused():
    with pytest.raises(ValueError, match=r"resume=True needs run_dir"):
        train(tiny_config(), progress=False, resume=True)
    with pytest.raises(ValueError, match=r"keep=0: must be >= 1"):
        train(tiny_config(), progress=False, run_dir="unused", keep=0)
    with pytest.raises(ValueError, match=r"checkpoint_every=0: must be >= 1"):
        train(tiny_config(), progress=False, run_dir="unused", checkpoint_every=0)
    assert not os.path.exists("unused")


@pytest.mark.slow
def test_cli_resume_continues_the_run_dir(tmp_path, capsys):
    from jaxrl_fast.cli import main

    args = ["train", "--env", "probe-chain", "--total-env-steps", "1200", "--learning-starts"]
    args += ["200", "--num-chunks", "2", "--eval-episodes", "2", "--no-progress"]
    assert main([*args, "--run-dir", str(tmp_path), "--checkpoint-every", "500"]) == 0
    before = _hashes(tmp_path)
    assert sorted(os.listdir(tmp_path / "checkpoints")) == ["1", "2"]
    assert main([*args, "--resume", str(tmp_path)]) == 0  # finished: nothing left to run
    assert _hashes(tmp_path) == before
    out = capsys.readouterr()
    assert "Traceback" not in out.err


_KILLED_RUN = """
import os, signal, sys
sys.path.insert(0, sys.argv[2])
from jaxrl_fast import parallel
parallel.use_cpu_cores(int(sys.argv[3]))  # the parent's devices: bitwise needs the same layout
from conftest import tiny_config
from jaxrl_fast.run.train import train

def on_chunk(rec):
    if rec["chunk"] == 2:  # logged, not yet saved: the newest checkpoint is chunk 1's
        os.kill(os.getpid(), signal.SIGKILL)

train(tiny_config(eval_episodes=2), progress=False, run_dir=sys.argv[1], checkpoint_every=200,
      on_chunk=on_chunk)
"""


@pytest.mark.slow
def test_sigkill_mid_run_loses_nothing_saved_and_resumes_exactly(uninterrupted, tmp_path):
    import signal
    import subprocess
    import sys

    full, full_path = uninterrupted
    tests = os.path.dirname(os.path.dirname(__file__))  # tests/, for conftest
    proc = subprocess.run(
        [sys.executable, "-c", _KILLED_RUN, str(tmp_path), tests, str(len(jax.devices()))],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    assert sorted(os.listdir(tmp_path / "checkpoints")) == ["1", "2"]
    assert _rows(tmp_path)[-1] == (2, 1)  # chunk 2 was logged before the kill
    train(full.config, progress=False, run_dir=tmp_path, resume=True, checkpoint_every=200)
    assert _hashes(tmp_path) == _hashes(full_path)
    assert _rows(tmp_path) == [(c, s) for c in range(4) for s in range(2)]


_KILLED_MID_SAVE = """
import os, re, signal, sys, threading, time
sys.path.insert(0, sys.argv[2])
from jaxrl_fast import parallel
parallel.use_cpu_cores(int(sys.argv[3]))  # the parent's devices: bitwise needs the same layout
from conftest import tiny_config
from jaxrl_fast import checkpoint
from jaxrl_fast.run.train import train

run_dir, how = sys.argv[1], sys.argv[4]
where = os.path.join(run_dir, "checkpoints")
unfinished = re.compile(r"(\\d+)" + re.escape(checkpoint.TMP_SUFFIX) + ".*")


def die():
    os.kill(os.getpid(), signal.SIGKILL)


if how == "watch":  # poll every ~1 ms: die as soon as a save after the first has begun
    def watch():
        while True:
            names = os.listdir(where) if os.path.isdir(where) else []
            if any((m := unfinished.fullmatch(n)) and int(m.group(1)) > 1 for n in names):
                die()
            time.sleep(0.001)

    threading.Thread(target=watch, daemon=True).start()
else:  # "rename": every file of the save written, dies just before orbax renames it into place
    from orbax.checkpoint._src.path import atomicity

    finalize = atomicity.AtomicRenameTemporaryPath.finalize

    async def finalize_or_die(self):
        name = self.get_final().name
        if name.isdigit() and int(name) > 1:
            die()
        return await finalize(self)

    atomicity.AtomicRenameTemporaryPath.finalize = finalize_or_die

train(tiny_config(eval_episodes=2), progress=False, run_dir=run_dir, checkpoint_every=200)
"""


@pytest.mark.slow
@pytest.mark.parametrize("how", ["watch", "rename"])
def test_sigkill_mid_save_keeps_the_previous_checkpoint_and_resumes_exactly(
    uninterrupted, tmp_path, how
):
    """SIGKILL while checkpoint 2 is being written: as soon as its temporary directory appears
    ("watch", a thread polling every ~1 ms), or with every file written just before orbax
    renames it ("rename"). Checkpoint 1 survives, and the run resumed from it ends bitwise where
    the uninterrupted one does."""
    import signal
    import subprocess
    import sys

    from jaxrl_fast import checkpoint

    full, full_path = uninterrupted
    tests = os.path.dirname(os.path.dirname(__file__))  # tests/, for conftest
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            _KILLED_MID_SAVE,
            str(tmp_path),
            tests,
            str(len(jax.devices())),
            how,
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    names = sorted(os.listdir(tmp_path / "checkpoints"))
    assert names[0] == "1" and names[1].startswith("2" + checkpoint.TMP_SUFFIX), names
    assert len(names) == 2  # killed mid-save: checkpoint 2 is unfinished, nothing after it
    unfinished = tmp_path / "checkpoints" / names[1]
    if how == "rename":  # everything was written but the rename that makes it a checkpoint
        assert (unfinished / "state" / "_METADATA").exists()
    train(full.config, progress=False, run_dir=tmp_path, resume=True, checkpoint_every=200)
    assert _hashes(tmp_path) == _hashes(full_path)
    assert _rows(tmp_path) == [(c, s) for c in range(4) for s in range(2)]
    assert sorted(os.listdir(tmp_path / "checkpoints")) == [
        "2",
        "3",
        "4",
    ]  # the unfinished one went
