"""plot.py: run directories written by hand (no training), figures checked by their data."""

from __future__ import annotations

import argparse
import importlib
import json
import math
import sys

import numpy as np
import pytest

from jaxrl_fast.run import plot

pytest.importorskip("matplotlib")

# episode_return[seed][chunk]; None is a chunk in which no episode ended.
RETURNS = [[1.0, None, 3.0, 10.0], [3.0, None, 5.0, None], [5.0, None, 13.0, 20.0]]
STEPS = [100, 200, 300, 400]


@pytest.fixture(autouse=True)
def _agg(monkeypatch):
    monkeypatch.setenv("MPLBACKEND", "Agg")


def _row(chunk, seed, **values):
    row = {
        "chunk": chunk,
        "seed_index": seed,
        "env_steps": STEPS[chunk],
        "elapsed_s": 0.1 * chunk,
        "epsilon": 1.0 - 0.2 * chunk,
        "learning_rate": 1e-3,
        "episode_return": RETURNS[seed][chunk],
        "episode_length": 7.0,
        "episodes": 2.0,
        "loss": 0.5 * (chunk + 1) * (seed + 1),
        "q": float(chunk),
        "abs_td": 0.1,
        "skipped": 0.0,
        "loss_scale": 1.0,
        "fp32_fallback": False,
        "replay.size": 10 * chunk,
    }
    row.update(values)
    return row


def _write_run(path, rows, env="CartPole-v1", num_seeds=3, tail=""):
    path.mkdir(parents=True, exist_ok=True)
    config = {"config": {"env": {"name": env}, "num_seeds": num_seeds}, "versions": {}}
    (path / "config.json").write_text(json.dumps(config))
    text = "".join(json.dumps(r) + "\n" for r in rows) + tail
    (path / "metrics.jsonl").write_text(text)
    return path


def _rows(eval_return=None, chunks=4, seeds=3):
    """All rows; `eval_return(chunk, seed)` gives the eval_return column (omitted if None)."""
    rows = []
    for c in range(chunks):
        for s in range(seeds):
            extra = {} if eval_return is None else {"eval_return": eval_return(c, s)}
            rows.append(_row(c, s, **extra))
    return rows


def _band(ax, index=0):
    """(x, low, high) of the index-th fill_between band of `ax`."""
    vertices = ax.collections[index].get_paths()[0].vertices
    xs = np.unique(vertices[:, 0])
    low = np.array([vertices[vertices[:, 0] == x, 1].min() for x in xs])
    high = np.array([vertices[vertices[:, 0] == x, 1].max() for x in xs])
    return xs, low, high


def _panel(fig, title):
    return next(ax for ax in fig.axes if ax.get_title() == title)


def test_load_run_arrays_with_nan_for_null(tmp_path):
    run = plot.load_run(_write_run(tmp_path / "run_a", _rows()))
    assert run.name == "run_a" and run.env == "CartPole-v1" and run.num_seeds == 3
    assert run.env_steps.tolist() == STEPS and run.chunks.tolist() == [0, 1, 2, 3]
    expected = np.array([[np.nan if v is None else v for v in seed] for seed in RETURNS])
    np.testing.assert_array_equal(run.metrics["episode_return"], expected)
    assert run.metrics["loss"].shape == (3, 4) and run.metrics["loss"][2, 1] == 3.0
    assert run.metrics["fp32_fallback"].dtype == np.float64
    assert run.metrics["replay.size"][0].tolist() == [0, 10, 20, 30]
    # never evaluated: eval_return is there, all NaN
    assert np.isnan(run.metrics["eval_return"]).all()


def test_load_run_skips_truncated_last_line(tmp_path):
    rows = _rows()
    partial = json.dumps(_row(0, 0) | {"chunk": 4})[:37]  # a killed run's cut-off write
    run = plot.load_run(_write_run(tmp_path / "killed", rows, tail=partial))
    assert run.env_steps.tolist() == STEPS


def test_load_run_missing_rows_of_a_killed_chunk_are_nan(tmp_path):
    # the run died while writing chunk 3: only seed 0's row made it
    rows = [r for r in _rows() if not (r["chunk"] == 3 and r["seed_index"] > 0)]
    run = plot.load_run(_write_run(tmp_path / "killed", rows))
    assert run.metrics["loss"][:, 3].tolist()[0] == 2.0
    assert np.isnan(run.metrics["loss"][1:, 3]).all()


def test_load_run_corrupt_middle_line_names_file_and_line(tmp_path):
    d = _write_run(tmp_path / "bad", _rows())
    lines = (d / "metrics.jsonl").read_text().splitlines()
    lines[2] = lines[2][:20]
    (d / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    with pytest.raises(ValueError, match=r"metrics\.jsonl:3 is not JSON"):
        plot.load_run(d)


@pytest.mark.parametrize(
    "make, match",
    [
        (lambda p: p, r"does not exist"),
        (lambda p: p.mkdir() or p, r"has no metrics\.jsonl"),
        (lambda p: _write_run(p, []), r"holds no metrics rows"),
        (lambda p: _write_run(p, [], tail='{"chunk": 0, "se'), r"holds no metrics rows"),
        (lambda p: _write_run(p, [{"a": 1}, {"b": 2}]), r"metrics\.jsonl:1 is not a metrics row"),
    ],
    ids=["missing-dir", "no-metrics", "empty", "only-partial-line", "not-rows"],
)
def test_load_run_bad_dir_raises_naming_path(tmp_path, make, match):
    path = make(tmp_path / "run")
    with pytest.raises(ValueError, match=match) as err:
        plot.load_run(path)
    assert str(tmp_path / "run") in str(err.value)


def test_seed_summary_is_nan_aware():
    values = np.array([[1.0, np.nan, 4.0], [3.0, np.nan, np.nan]])
    mean, low, high = plot.seed_summary(values)
    np.testing.assert_array_equal(mean, [2.0, np.nan, 4.0])
    np.testing.assert_array_equal(low, [1.0, np.nan, 4.0])
    np.testing.assert_array_equal(high, [3.0, np.nan, 4.0])


def test_mean_line_and_min_max_band(tmp_path):
    fig = plot.plot_runs([_write_run(tmp_path / "run", _rows())])
    ax = _panel(fig, "training episode return")
    (line,) = ax.get_lines()
    # chunk 1 (no seed finished an episode) is left out; chunk 3 averages the two seeds with one
    assert line.get_xdata().tolist() == [100, 300, 400]
    assert line.get_ydata().tolist() == [3.0, 7.0, 15.0]
    xs, low, high = _band(ax)
    assert xs.tolist() == [100, 300, 400]
    assert low.tolist() == [1.0, 3.0, 10.0] and high.tolist() == [5.0, 13.0, 20.0]
    loss = _panel(fig, "TD loss").get_lines()[0]
    # loss = 0.5 (c+1) (s+1): the mean over seeds 0..2 is c+1
    np.testing.assert_allclose(loss.get_ydata(), [1.0, 2.0, 3.0, 4.0])


def test_eval_panel_drawn_only_at_evaluated_chunks(tmp_path):
    def evaluation(c, s):
        return 100.0 * (s + 1) if c in (1, 3) else None

    fig = plot.plot_runs([_write_run(tmp_path / "run", _rows(evaluation))])
    titles = [ax.get_title() for ax in fig.axes]
    assert titles == [
        "training episode return",
        "evaluation return",
        "TD loss",
        "mean Q",
        "exploration epsilon",
    ]
    (line,) = _panel(fig, "evaluation return").get_lines()
    assert line.get_xdata().tolist() == [200, 400] and line.get_ydata().tolist() == [200.0, 200.0]
    assert line.get_marker() == "o"


@pytest.mark.parametrize("column", ["absent", "null"])
def test_eval_panel_omitted_without_evaluation(tmp_path, column):
    rows = _rows() if column == "absent" else _rows(lambda c, s: None)
    fig = plot.plot_runs([_write_run(tmp_path / "run", rows)])
    titles = [ax.get_title() for ax in fig.axes]
    assert "evaluation return" not in titles and len(titles) == 4


def test_two_runs_two_lines_per_panel_and_legend(tmp_path):
    a = _write_run(tmp_path / "dqn", _rows())
    rows_b = [r | {"loss": 2 * r["loss"]} for r in _rows(seeds=2)]
    b = _write_run(tmp_path / "double_dqn", rows_b, num_seeds=2)
    fig = plot.plot_runs([a, b])
    for ax in fig.axes:
        assert len(ax.get_lines()) == 2 and len(ax.collections) == 2
    a_loss, b_loss = _panel(fig, "TD loss").get_lines()
    assert a_loss.get_color() != b_loss.get_color()
    # loss = (c+1) (s+1) over seeds 0..1
    np.testing.assert_allclose(b_loss.get_ydata(), [1.5, 3.0, 4.5, 6.0])
    (legend,) = fig.legends
    assert [t.get_text() for t in legend.get_texts()] == ["dqn (3 seeds)", "double_dqn (2 seeds)"]
    assert "min..max over seeds" in legend.get_title().get_text()
    assert "CartPole-v1" in legend.get_title().get_text()


def test_same_names_are_told_apart_by_path(tmp_path):
    a = _write_run(tmp_path / "a" / "run", _rows())
    b = _write_run(tmp_path / "b" / "run", _rows())
    fig = plot.plot_runs([a, b], metrics=("q",))
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert labels == [f"{a} (3 seeds)", f"{b} (3 seeds)"]


@pytest.mark.parametrize("ext, magic", [(".png", b"\x89PNG\r\n\x1a\n"), (".pdf", b"%PDF")])
def test_saves_file_by_extension(tmp_path, ext, magic):
    out = tmp_path / "figures" / f"curves{ext}"  # the directory is made
    plot.plot_runs([_write_run(tmp_path / "run", _rows())], out=out)
    data = out.read_bytes()
    assert len(data) > 1000 and data.startswith(magic)


def test_svg(tmp_path):
    out = tmp_path / "curves.svg"
    plot.plot_runs([_write_run(tmp_path / "run", _rows())], out=out)
    assert b"<svg" in out.read_bytes()[:1000]


def test_bad_metric_and_out_raise(tmp_path):
    d = _write_run(tmp_path / "run", _rows())
    with pytest.raises(
        ValueError, match=r"metric 'los' is in none of the runs; did you mean 'loss'"
    ):
        plot.plot_runs([d], metrics=("los",))
    with pytest.raises(ValueError, match=r"none of the metrics eval_return has a value"):
        plot.plot_runs([d], metrics=("eval_return",))
    with pytest.raises(ValueError, match=r"extension picks the format"):
        plot.plot_runs([d], out=tmp_path / "curves.txt")
    with pytest.raises(ValueError, match=r"needs at least one run"):
        plot.plot_runs([])


def test_main_default_out_is_in_the_run_dir(tmp_path, capsys):
    d = _write_run(tmp_path / "run", _rows())
    assert plot.main([str(d)]) == 0
    out = d / "curves.png"
    assert capsys.readouterr().out.strip() == str(out)
    assert out.read_bytes().startswith(b"\x89PNG")


def test_main_several_dirs_need_out(tmp_path, capsys):
    a = _write_run(tmp_path / "a", _rows())
    b = _write_run(tmp_path / "b", _rows())
    assert plot.main([str(a), str(b)]) == 2
    assert "give --out FILE" in capsys.readouterr().err
    out = tmp_path / "both.png"
    assert plot.main([str(a), str(b), "--out", str(out), "--metrics", "loss, q"]) == 0
    assert out.stat().st_size > 0


def test_main_missing_dir_is_one_line_error_and_creates_nothing(tmp_path, capsys):
    missing = tmp_path / "nope"
    assert plot.main([str(missing)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{str(missing)!r} does not exist" in err
    assert not missing.exists()


def test_add_parser_wires_a_plot_subcommand(tmp_path, capsys):
    parser = argparse.ArgumentParser(prog="jaxrl-fast")
    sub = parser.add_subparsers(dest="command", required=True)
    plot.add_parser(sub)
    d = _write_run(tmp_path / "run", _rows())
    out = tmp_path / "x.png"
    args = parser.parse_args(["plot", str(d), "--out", str(out)])
    assert args.func(args) == 0 and out.exists()
    assert capsys.readouterr().out.strip() == str(out)


def test_import_without_matplotlib_then_plot_says_how_to_install(tmp_path, monkeypatch):
    import jaxrl_fast.run

    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib -> ImportError
    monkeypatch.delitem(sys.modules, "jaxrl_fast.run.plot")
    monkeypatch.setattr(jaxrl_fast.run, "plot", plot)  # undone: the import below rebinds it
    fresh = importlib.import_module("jaxrl_fast.run.plot")
    assert fresh is not plot
    run = fresh.load_run(_write_run(tmp_path / "run", _rows()))  # numpy only
    assert math.isnan(run.metrics["episode_return"][0, 1])
    with pytest.raises(ImportError, match=r"pip install 'jaxrl-fast\[plot\]'"):
        fresh.plot_runs([tmp_path / "run"])
