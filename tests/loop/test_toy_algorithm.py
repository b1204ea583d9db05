"""An algorithm is its module, its preset and its test (DESIGN §2): `toy_algorithm.py` adds a
loss with its own knob (`TrainConfig.algo.toy.scale`) and a preset, touching no library file;
here it trains from the command line with its knob on the line, is swept in one program, and
its knob is checked like any config field. In a fresh process, so that its registrations do
not reach the other tests' registries."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys
import textwrap

import pytest
from conftest import child_env

HERE = pathlib.Path(__file__).parent

SCRIPT = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    from jaxrl_fast.cli import main
    from jaxrl_fast.config import SWEEPABLE, TrainConfig, options

    out = {}
    # the command line: the plugin's preset and its knob (the plugin is imported by --plugin)
    for scale in ("0", "1.5"):
        run_dir = f"{sys.argv[1]}/scale-{scale}"
        argv = ["--plugin", "toy_algorithm", "train", "--preset", "toy-probe",
                "--algo.toy.scale", scale, "--run-dir", run_dir, "--no-progress"]
        out[f"rc-{scale}"] = main(argv)
        with open(f"{run_dir}/config.json") as f:
            out[f"config-{scale}"] = json.load(f)["config"]["algo"]
        with open(f"{run_dir}/metrics.jsonl") as f:
            out[f"loss-{scale}"] = [json.loads(line)["loss"] for line in f]
    # a bad value is refused naming the field, before anything compiles
    out["bad"] = main(["--plugin", "toy_algorithm", "train", "--preset", "toy-probe",
                       "--algo.toy.scale", "-1", "--no-progress"])
    # the knob is sweepable: both points in one program (scale 0: a zero loss)
    from jaxrl_fast import presets, train
    cfg = presets.get("toy-probe").replace(num_seeds=1)
    res = train(cfg, sweep={"algo.toy.scale": [0.0, 1.0]}, progress=False)
    out["sweep_points"] = len(res.points)
    out["sweep_loss"] = [float(np.asarray(res.result.history[-1]["loss"])[i]) for i in range(2)]
    out["sweepable"] = "algo.toy.scale" in SWEEPABLE
    out["option"] = options.field("algo.toy.scale").option
    print("RESULT" + json.dumps(out))
    """
)


@pytest.mark.slow
def test_a_toy_algorithm_from_its_own_files_trains_from_the_cli_with_its_knob(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=600,
        env=child_env(PYTHONPATH=f"{HERE}{':' + str(HERE.parent)}"),
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.split("RESULT", 1)[1])
    assert out["rc-0"] == 0 and out["rc-1.5"] == 0
    assert out["config-0"]["toy"] == {"scale": 0.0}
    assert out["config-1.5"]["toy"] == {"scale": 1.5}
    assert out["config-0"]["munchausen"]["alpha"] == 0.9  # the library's own section beside it
    assert all(loss == 0.0 for loss in out["loss-0"]), out["loss-0"]
    assert all(loss > 0.0 for loss in out["loss-1.5"]), out["loss-1.5"]
    assert out["bad"] == 2
    assert out["option"] == "--algo.toy.scale" and out["sweepable"]
    assert out["sweep_points"] == 2
    assert out["sweep_loss"][0] == 0.0 and out["sweep_loss"][1] > 0.0
