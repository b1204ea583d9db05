"""Every config field on the command line: generated options, --set, --config, --print-config,
--force-config."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from conftest import tiny_config

from jaxrl_fast import presets
from jaxrl_fast.cli import main, make_parser
from jaxrl_fast.config import RESUME_OVERRIDABLE, TrainConfig, options
from jaxrl_fast.run.train import train


def _printed(capsys, *argv) -> dict:
    assert main(["train", *argv, "--print-config"]) == 0
    out = capsys.readouterr().out
    return json.loads(out[out.index("{") :])


def test_help_lists_every_field_with_its_meaning_and_default():
    # `--help-all` (make_parser(full_help=True)); `--help` names the field options only
    text = " ".join(
        make_parser(True)._subparsers._group_actions[0].choices["train"].format_help().split()
    )
    for f in options.fields():
        assert f.option in text, f.name
        assert f.doc, f"{f.name} has no line in its class's Attributes docstring"
        assert " ".join(f.doc.split()[:6]) in text, f.name
    assert "--dqn.learning-rate FLOAT Adam step size" in text
    assert "(default 0.00025)" in text
    assert len(options.fields()) > 60  # every part's fields, the Atari settings included


def test_field_options_and_set_reach_the_config(capsys):
    cfg = _printed(
        capsys,
        "--preset", "cartpole",
        "--dqn.learning-rate", "1e-4",
        "--network.hidden-sizes", "64,32",
        "--replay.prioritised", "true",
        "--eval-every", "5000",
        "--dqn.max-grad-norm", "none",
        "--set", "schedule.epsilon_end=0.02",
        "--set", "env.atari.frame_skip=2",
    )  # fmt: skip
    assert cfg["dqn"]["learning_rate"] == 1e-4
    assert cfg["network"]["hidden_sizes"] == [64, 32]
    assert cfg["replay"]["prioritised"] is True
    assert cfg["eval_every"] == 5000 and cfg["dqn"]["max_grad_norm"] is None
    assert cfg["schedule"]["epsilon_end"] == 0.02 and cfg["env"]["atari"]["frame_skip"] == 2
    # the rest is the preset's
    assert cfg["total_env_steps"] == presets.get("cartpole").total_env_steps


def test_later_sources_win_preset_file_short_field_set(capsys, tmp_path):
    path = tmp_path / "cfg.json"
    path.write_text(json.dumps({"dqn": {"gamma": 0.9, "learning_rate": 3e-3}, "num_seeds": 3}))
    cfg = _printed(
        capsys,
        "--config", str(path),
        "--seeds", "5",
        "--dqn.gamma", "0.8",
        "--set", "dqn.gamma=0.7",
    )  # fmt: skip
    assert cfg["dqn"]["learning_rate"] == 3e-3  # from the file
    assert cfg["num_seeds"] == 5  # the short option beats the file
    assert cfg["dqn"]["gamma"] == 0.7  # --set beats the field option


def test_a_run_directorys_config_json_is_a_config_file(capsys, tmp_path):
    cfg = TrainConfig().replace(dqn={"gamma": 0.95}, network={"hidden_sizes": (7,)})
    (tmp_path / "config.json").write_text(json.dumps({"config": cfg.to_dict(), "versions": {}}))
    got = _printed(capsys, "--config", str(tmp_path / "config.json"))
    assert got == json.loads(json.dumps(cfg.to_dict()))


@pytest.mark.parametrize(
    "argv, match",
    [
        (["--set", "dqn.learnin_rate=1"], r"'dqn.learnin_rate' is not a config field\. Did you "
         r"mean dqn\.learning_rate\?"),
        (["--set", "dqn.gamma"], r"--set 'dqn.gamma': expected FIELD=VALUE"),
        (["--set", "dqn.gamma=abc"], r"DQNConfig\.gamma='abc' is not allowed"),
        (["--network.hidden-sizes", "a,b"], r"network\.hidden_sizes='a,b' is not allowed; "
         r"expected comma-separated ints"),
        (["--config", "/nonexistent/x.json"], r"--config '/nonexistent/x\.json': No such file"),
    ],
)  # fmt: skip
def test_bad_fields_are_one_line_errors(capsys, argv, match):
    assert main(["train", *argv, "--print-config"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("jaxrl-fast: error:") and err.count("\n") == 1
    assert re.search(match, err), err


def test_config_file_with_unknown_field_is_refused(capsys, tmp_path):
    path = tmp_path / "cfg.json"
    path.write_text(json.dumps({"dqn": {"gama": 0.9}}))
    assert main(["train", "--config", str(path), "--print-config"]) == 2
    assert "'dqn.gama' is not a config field. Did you mean dqn.gamma?" in capsys.readouterr().err


def test_overridable_fields_exist():
    names = {f.name for f in options.fields()}
    assert set(RESUME_OVERRIDABLE) <= names


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    path = tmp_path_factory.mktemp("force") / "run"
    train(tiny_config(), progress=False, run_dir=path)
    return path


@pytest.mark.slow
def test_resume_refuses_a_changed_config_unless_forced(finished_run):
    changed = tiny_config(dqn={"learning_rate": 5e-4}, eval_episodes=3)
    with pytest.raises(ValueError, match=r"dqn\.learning_rate, eval_episodes; force_config=True"):
        train(changed, progress=False, run_dir=finished_run, resume=True)
    shape = tiny_config(network={"hidden_sizes": (16,)}, dqn={"learning_rate": 5e-4})
    with pytest.raises(ValueError, match=r"cannot accept .*: network\.hidden_sizes\. Res"):
        train(shape, progress=False, run_dir=finished_run, resume=True, force_config=True)
    result = train(changed, progress=False, run_dir=finished_run, resume=True, force_config=True)
    assert result.config.eval_episodes == 3
    # the traced hyperparameters are the forced config's, not the checkpoint's
    lr = np.asarray(result.runner.seeds.agent.hparams.learning_rate)
    np.testing.assert_allclose(lr, [5e-4, 5e-4], rtol=1e-7)
    saved = json.loads((finished_run / "config.json").read_text())
    assert saved["config"]["dqn"]["learning_rate"] == 5e-4
    assert saved["forced"][0]["fields"] == ["dqn.learning_rate", "eval_episodes"]
    assert saved["forced"][0]["config"]["dqn"]["learning_rate"] == 1e-3


def test_cli_resume_without_flags_uses_the_runs_config(capsys, finished_run, tmp_path):
    cfg = _printed(capsys, "--resume", str(finished_run))
    saved = json.loads((finished_run / "config.json").read_text())["config"]
    assert cfg == saved and cfg["env"]["name"] == "probe-chain"


def test_resume_of_a_missing_directory_is_refused_before_compiling(capsys, tmp_path):
    typo = tmp_path / "runz"
    assert main(["train", "--resume", str(typo), "--total-env-steps", "20000"]) == 2
    err = capsys.readouterr().err
    assert f"resume: {str(typo)!r} does not exist" in err and "--resume-or-start DIR" in err
    assert not typo.exists()  # nothing was started there
    with pytest.raises(ValueError, match=r"resume='maybe': one of \(False, True, 'or_start'\)"):
        train(tiny_config(), progress=False, run_dir=tmp_path / "r", resume="maybe")
    assert main(["train", "--resume", "a", "--resume-or-start", "a"]) == 2
    assert "not both" in capsys.readouterr().err


@pytest.mark.slow
def test_resume_or_start_starts_a_new_run_and_says_so(capsys, tmp_path):
    run = tmp_path / "job"
    result = train(tiny_config(), progress=False, run_dir=run, resume="or_start")
    err = capsys.readouterr().err
    assert f"resume: {run / 'checkpoints'} holds no checkpoint yet" in err
    assert result.resumed_env_steps == 0 and (run / "metrics.jsonl").exists()
    # the same call again continues the finished run from its last checkpoint
    again = train(tiny_config(), progress=False, run_dir=run, resume="or_start")
    assert "resumed from the checkpoint after" in capsys.readouterr().err
    assert again.resumed_env_steps == tiny_config().total_env_steps
