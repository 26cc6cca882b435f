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
    for (fwd, bwd), g in zip(phases, pred.groups):
        assert fwd > 0 and bwd > 0 and fwd + bwd == pytest.approx(g.compute_s, rel=1e-6)
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
    pred = predict(resnet50_profile, "1x p3.2xlarge", 32)
    with pytest.raises(ValueError, match="timeline=True"):
        plots.timeline_figure(pred)
    with pytest.raises(ValueError, match=r"\.png"):
        plots.save_pareto(front, tmp_path / "front.jpeg")
    with pytest.raises(FileNotFoundError, match="does not exist"):
        plots.save_pareto(front, tmp_path / "missing" / "front.png")


def test_empty_front_still_draws(tmp_path):
    assert png_size(plots.save_pareto([], tmp_path / "empty.png"))[0] == 1000
