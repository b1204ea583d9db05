"""The command line's errors: short, naming the option or field; negative numbers after an
option; one field set twice; Ctrl-C's last line."""

from __future__ import annotations

import importlib

import pytest

from jaxrl_fast.cli import main
from jaxrl_fast.cli.parser import negative_values


def test_negative_numbers_after_an_option_are_its_value(capsys):
    assert negative_values(["--a", "-1e-3", "--b", "-2", "--c=-3", "x", "-1"]) == [
        "--a=-1e-3",
        "--b=-2",
        "--c=-3",
        "x",
        "-1",
    ]
    # parsed as the option's value: the config's own check then judges it
    assert main(["train", "--dqn.learning-rate", "-1e-3", "--print-config"]) == 2
    assert "DQNConfig.learning_rate=-0.001 is not allowed" in capsys.readouterr().err


def test_an_argparse_error_is_one_short_block(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["train", "--dqn.gamma"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        "jaxrl-fast train: error: argument --dqn.gamma: expected one argument",
        "  --dqn.gamma FLOAT: discount factor in [0, 1]. (default 0.99)",
        "(`jaxrl-fast train --help` lists the options)",
    ]


def test_parse_errors_name_the_field(capsys):
    assert main(["train", "--network.hidden-sizes", "64,x", "--print-config"]) == 2
    assert "network.hidden_sizes='64,x' is not allowed" in capsys.readouterr().err


def test_a_field_set_by_two_options_is_refused(capsys):
    assert main(["train", "--seeds", "2", "--num-seeds", "3", "--print-config"]) == 2
    err = capsys.readouterr().err
    assert "two options set the same field: --seeds 2 and --num-seeds 3" in err


def test_ctrl_c_ends_with_one_line_on_how_to_resume(monkeypatch, capsys, tmp_path):
    def interrupted(args):
        raise KeyboardInterrupt

    module = importlib.import_module("jaxrl_fast.cli.main")  # (the package exports main())
    monkeypatch.setattr(module, "_train", interrupted)
    run = str(tmp_path / "run")
    assert main(["train", "--run-dir", run]) == 130
    assert capsys.readouterr().err.strip() == (
        f"jaxrl-fast: interrupted; `jaxrl-fast train --resume {run}` continues from its last "
        "checkpoint"
    )
    assert main(["train"]) == 130
    assert "nothing was kept" in capsys.readouterr().err


def _help(capsys, *argv):
    with pytest.raises(SystemExit) as exit_:
        main(list(argv))
    assert exit_.value.code == 0
    return capsys.readouterr().out


def test_help_is_short_and_help_all_is_whole(capsys):
    from jaxrl_fast.config import options

    short, whole = _help(capsys, "train", "--help"), _help(capsys, "train", "--help-all")
    assert len(short.splitlines()) < 200 < len(whole.splitlines())
    for f in options.fields():  # every field's option is named in both, its help only in whole
        assert f.option in short and f.option in whole, f.option
        assert options.help_text(f).split(".")[0][:40] in " ".join(whole.split()), f.name
    assert "TrainConfig.dqn fields:" in short
    assert " ".join(short.split()).count("(--help-all: what each one does)") == 1  # said once
