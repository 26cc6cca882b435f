"""Figures: the PNGs exist, have the promised size, and bad input is refused clearly."""
from __future__ import annotations

import struct

import pytest

import srift
from srift.prediction import predict
from srift import plots
from srift.engine import Engine


def png_size(path) -> tuple[int, int]:
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n" and head[12:16] == b"IHDR"
    return struct.unpack(">II", head[16:24])


@pytest.fixture(scope="module")
def front(resnet50_profile):
    return srift.pareto(resnet50_profile, global_batch=256, iterations=100_000,
                        instance_types=["g4dn.xlarge", "g5.xlarge", "g5.12xlarge", "p3.8xlarge"],
                        regions="us-east-1")


def test_pareto_png(tmp_path, front):
    assert len(front) >= 3
    path = plots.save_pareto(front, tmp_path / "front.png")
    assert png_size(path) == (int(plots.FIGSIZE[0] * plots.DPI), int(plots.FIGSIZE[1] * plots.DPI))
    fig = plots.pareto_figure(front)
    texts = [t.get_text() for t in fig.axes[0].texts]
    # every plan is labelled with its cluster, time and cost (an even subset beyond 12)
    assert len(texts) == min(len(front), 12)
    for end in (front[0], front[-1]):
        # a mixed cluster's groups are joined with " + " in its label
        assert any(all(str(g) in t for g in end.cluster.groups) for t in texts), (end.cluster, texts)


def test_pareto_many_plans_label_a_subset(front):
    fig = plots.pareto_figure(front, max_labels=2)
    assert len(fig.axes[0].texts) == 2


def test_timeline_png(tmp_path, resnet50_profile, catalog):
    engine = Engine(resnet50_profile, catalog)
    pred = predict(resnet50_profile, "2x p3.16xlarge + 4x g4dn.12xlarge", 256, catalog=catalog,
                         engine=engine, timeline=True)
    phases = plots.phase_split(pred, engine)
    for (before, fwd, bwd), g in zip(phases, pred.groups):
        assert before == 0 and fwd > 0 and bwd > 0 and fwd + bwd == pytest.approx(g.compute_s, rel=1e-6)
    path = plots.save_timeline(pred, tmp_path / "timeline.png", phases=phases)
    width, height = png_size(path)
    assert width == int(plots.FIGSIZE[0] * plots.DPI) and height >= 300
    fig = plots.timeline_figure(pred, phases=phases)
    labels = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert labels[0].startswith("2x p3.16xlarge") and "allreduce" in labels[2] and labels[3] == "optimizer"
    # one bar per bucket on the allreduce lane
    assert any("b0" in t.get_text() for t in fig.axes[0].texts)
    # the buffer broadcast comes first: compute starts after it, and the shaded exposed
    # communication is as wide as the figure it is labelled with
    assert pred.broadcast_s > 0 and "buffers" in labels[2]
    ax = fig.axes[0]
    compute_starts = [path.get_extents().x0 for coll in ax.collections[:len(pred.groups) * 2]
                      for path in coll.get_paths()]
    assert min(compute_starts) == pytest.approx(pred.broadcast_s * 1e3, rel=1e-9)
    span = next(p for p in ax.patches if p.get_alpha() == 0.08)
    x0 = span.get_x()
    width = span.get_width()
    assert width == pytest.approx(pred.exposed_comm_s * 1e3, rel=1e-9)
    assert x0 == pytest.approx((pred.broadcast_s + pred.compute_s + pred.interference_s) * 1e3, rel=1e-9)


def test_plot_errors(tmp_path, resnet50_profile, front):
    pred = predict(resnet50_profile, "1x p3.8xlarge", 32)  # several GPUs: their allreduces need the timeline
    with pytest.raises(ValueError, match="timeline=True"):
        plots.timeline_figure(pred)
    with pytest.raises(ValueError, match=r"\.png"):
        plots.save_pareto(front, tmp_path / "front.jpeg")
    with pytest.raises(FileNotFoundError, match="does not exist"):
        plots.save_pareto(front, tmp_path / "missing" / "front.png")


def test_empty_front_still_draws(tmp_path):
    assert png_size(plots.save_pareto([], tmp_path / "empty.png"))[0] == 1000


def test_timeline_under_accumulation_draws_the_earlier_micro_steps(tmp_path, resnet50_profile, catalog):
    from srift.engine import EngineConfig

    engine = Engine(resnet50_profile, catalog, EngineConfig(max_accumulation_steps=8))
    pred = predict(resnet50_profile, "1x p3.8xlarge", 1024, catalog=catalog, engine=engine, timeline=True)
    k = pred.accumulation_steps
    assert k > 1
    (before, fwd, bwd), = plots.phase_split(pred, engine)
    g = pred.groups[0]
    model, _ = engine.instance_compute(g.instance_type)
    b = g.local_batch_high if g.ranks_high else g.local_batch_low
    # the all-reducing micro-step is one micro-step's forward and backward; the rest came before
    assert fwd == pytest.approx(model.forward_s(b), rel=1e-12)
    assert bwd == pytest.approx(model.backward_s(b), rel=1e-12)
    assert before + fwd + bwd == pytest.approx(g.compute_s, rel=1e-12)
    assert before >= (k - 1) * (fwd + bwd) * 0.99  # k - 1 micro-steps and their gradient adds
    fig = plots.timeline_figure(pred, phases=plots.phase_split(pred, engine))
    labels = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert labels[0].endswith(f"batch {b} x {k} micro-steps")
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert f"{k - 1} earlier micro-step{'s' if k > 2 else ''}" in texts
    # backward ends where the compute ends: the bucket ticks follow it, not a stretched bar
    bars = [p.get_extents() for coll in fig.axes[0].collections[:3] for p in coll.get_paths()]
    assert max(bar.x1 for bar in bars) == pytest.approx((pred.broadcast_s + g.compute_s) * 1e3, rel=1e-9)


def test_timeline_of_one_gpu_has_no_allreduce(tmp_path, resnet50_profile, catalog):
    engine = Engine(resnet50_profile, catalog)
    pred = predict(resnet50_profile, "1x g4dn.xlarge", 32, catalog=catalog, engine=engine, timeline=True)
    assert pred.workers == 1 and not pred.buckets
    path = plots.save_timeline(pred, tmp_path / "one.png", phases=plots.phase_split(pred, engine))
    assert png_size(path)[0] == 1000
    labels = [t.get_text() for t in plots.timeline_figure(pred).axes[0].get_yticklabels()]
    assert "none: one GPU" in labels[1]


def test_pareto_labels_use_the_tables_units(front):
    from srift import report

    texts = [t.get_text() for t in plots.pareto_figure(front[:1]).axes[0].texts]
    p = front[0]
    assert texts == [f"{' + '.join(str(g) for g in p.cluster.groups)}\n{report.hours(p.total_hours)}, "
                     f"{report.usd(p.total_usd)}"]


@pytest.mark.parametrize("bad, message", [("", r"must end in \.png, \.svg or \.pdf, got ''"),
                                          ("front.jpg", "got 'front.jpg'"),
                                          ("/no/such/folder/front.png", "does not exist")])
def test_cli_checks_the_plot_path_before_searching(bad, message, capsys, monkeypatch):
    from srift import cli

    def no_search(*a, **k):
        raise AssertionError("searched before checking --plot")

    monkeypatch.setattr("srift.planning.pareto", no_search)
    assert cli.main(["pareto", "--model", "resnet50", "--global-batch", "64", "--iterations", "10",
                     "--plot", bad]) == 2
    import re
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("srift: error: ") and re.search(message, err[0])
