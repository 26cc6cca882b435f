"""Figures: the time-cost Pareto front and one iteration's timeline (matplotlib, Agg).

The figures are drawn on ``matplotlib.figure.Figure`` objects directly, never through
pyplot, so no GUI backend is touched, nothing global changes and the functions are safe to
call from a server or a worker thread.
"""
from __future__ import annotations

import math
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, Sequence

if TYPE_CHECKING:
    from srift.engine import Engine
    from srift.prediction import Prediction
    from srift.planning import Plan

__all__ = ["pareto_figure", "timeline_figure", "save_pareto", "save_timeline", "phase_split", "Phases",
           "FIGSIZE", "DPI"]

FIGSIZE = (10.0, 6.0)  # inches
DPI = 100              # so a figure is 1000 x 600 pixels
_COLORS = ("#4C72B0", "#DD8452", "#55A868", "#C44E52", "#8172B3", "#937860", "#DA8BC3", "#8C8C8C")


def _figure(figsize: tuple[float, float] = FIGSIZE) -> Any:
    try:
        from matplotlib.figure import Figure
    except ImportError as exc:  # pragma: no cover - matplotlib is in the test requirements
        raise ValueError("plots need matplotlib: pip install 'srift[plots]' (or pip install matplotlib)") from exc
    return Figure(figsize=figsize, dpi=DPI, layout="constrained")


def check_path(path: str | os.PathLike[str]) -> Path:
    """The plot's path, after checking its suffix and folder (ValueError / FileNotFoundError)."""
    text = os.fspath(path)
    path = Path(text)
    if path.suffix.lower() not in (".png", ".svg", ".pdf"):
        raise ValueError(f"plot path must end in .png, .svg or .pdf, got {text!r}")
    if not path.parent.exists():
        raise FileNotFoundError(f"folder {str(path.parent)!r} for the plot {path.name!r} does not exist")
    return path


def _plan_label(plan: Plan) -> str:
    return " + ".join(str(g) for g in plan.cluster.groups)


# ---- Pareto front ---------------------------------------------------------------------------
def pareto_figure(plans: Sequence[Plan], *, title: str | None = None, max_labels: int = 12) -> Any:
    """Total hours (x) against total USD (y) of each plan on the front, as a staircase, each
    point labelled with its cluster. With more than ``max_labels`` plans, an evenly spread
    subset (always both ends) is labelled."""
    fig = _figure()
    ax = fig.add_subplot()
    if not plans:
        ax.text(0.5, 0.5, "no plan on the front", ha="center", va="center", transform=ax.transAxes)
        ax.set_axis_off()
        return fig
    pts = sorted(((p.total_hours, p.total_usd, p) for p in plans), key=lambda t: t[0])
    xs = [t[0] for t in pts]
    ys = [t[1] for t in pts]
    ax.step(xs, ys, where="post", color="#BBBBBB", linewidth=1, zorder=1)
    regions = sorted({p.region for p in plans})
    for i, region in enumerate(regions):
        sel = [(x, y) for x, y, p in pts if p.region == region]
        ax.scatter([s[0] for s in sel], [s[1] for s in sel], s=36, color=_COLORS[i % len(_COLORS)],
                   label=region, zorder=2, edgecolor="white", linewidth=0.5)
    n = len(pts)
    if n <= max_labels:
        chosen = range(n)
    else:
        chosen = sorted({round(k * (n - 1) / (max_labels - 1)) for k in range(max_labels)})
    span_x = max(xs) / max(min(xs), 1e-12)
    span_y = max(ys) / max(min(ys), 1e-12)
    if span_x > 20:
        ax.set_xscale("log")
    if span_y > 20:
        ax.set_yscale("log")
    ax.set_xlabel("total training time (hours)")
    ax.set_ylabel("total cost (USD)")
    ax.set_title(title or f"time-cost Pareto front: {n} plans (fastest left, cheapest right)")
    ax.grid(True, which="major", alpha=0.3)
    ax.margins(x=0.12, y=0.12)
    if len(regions) > 1:
        ax.legend(title="region", fontsize=8, loc="upper right")
    from srift import report

    _place_labels(fig, ax, [(pts[i][0], pts[i][1],
                             f"{_plan_label(pts[i][2])}\n{report.hours(pts[i][0])}, {report.usd(pts[i][1])}")
                            for i in chosen])
    return fig


# Candidate label positions around a point: (dx, dy) in points, horizontal and vertical anchor.
_SPOTS = [(8, 6, "left", "bottom"), (-8, 6, "right", "bottom"), (8, -6, "left", "top"),
          (-8, -6, "right", "top"), (8, 22, "left", "bottom"), (-8, 22, "right", "bottom"),
          (8, -22, "left", "top"), (-8, -22, "right", "top"), (30, 0, "left", "center"),
          (-30, 0, "right", "center")]


def _place_labels(fig: Any, ax: Any, labels: Sequence[tuple[float, float, str]]) -> None:
    """Greedy placement: each label takes the first spot around its point that overlaps no
    label placed before it, no plotted point and stays inside the axes (else the least bad)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(fig)
    canvas.draw()  # settles the layout so display coordinates hold
    renderer = canvas.get_renderer()
    frame = ax.get_window_extent(renderer)
    points = [ax.transData.transform((x, y)) for x, y, _ in labels]
    placed: list[Any] = []
    for (x, y, text), _ in zip(labels, points):
        best, best_cost = None, math.inf
        for dx, dy, ha, va in _SPOTS:
            ann = ax.annotate(text, (x, y), xytext=(dx, dy), textcoords="offset points", fontsize=7.5, ha=ha,
                              va=va, bbox=dict(boxstyle="round,pad=0.2", facecolor="white", edgecolor="#DDDDDD",
                                               alpha=0.9),
                              arrowprops=dict(arrowstyle="-", color="#AAAAAA", linewidth=0.6) if abs(dy) > 10 or abs(dx) > 20 else None)
            box = ann.get_window_extent(renderer).expanded(1.02, 1.06)
            cost = sum(_overlap(box, other) for other in placed)
            cost += sum(1e3 for px, py in points if box.contains(px, py))
            outside = (max(0, frame.x0 - box.x0) + max(0, box.x1 - frame.x1)) * box.height \
                + (max(0, frame.y0 - box.y0) + max(0, box.y1 - frame.y1)) * box.width
            cost += 10 * outside
            if cost < best_cost:
                if best is not None:
                    best[0].remove()
                best, best_cost = (ann, box), cost
            else:
                ann.remove()
            if cost == 0:
                break
        placed.append(best[1])


def _overlap(a: Any, b: Any) -> float:
    w = min(a.x1, b.x1) - max(a.x0, b.x0)
    h = min(a.y1, b.y1) - max(a.y0, b.y0)
    return w * h if w > 0 and h > 0 else 0.0


def save_pareto(plans: Sequence[Plan], path: str | os.PathLike[str], **kwargs: Any) -> Path:
    path = check_path(path)
    pareto_figure(plans, **kwargs).savefig(path)
    return path


# ---- one iteration --------------------------------------------------------------------------
class Phases(NamedTuple):
    """One group's slowest rank in an iteration, seconds: the gradient-accumulation micro-steps
    before the one that all-reduces (0 without accumulation), then that one's forward and
    backward. They sum to the group's ``compute_s``."""

    before_s: float
    forward_s: float
    backward_s: float


def phase_split(prediction: Prediction, engine: Engine) -> list[Phases]:
    """The :class:`Phases` of each group's slowest rank, from the engine's compute models."""
    out = []
    for g in prediction.groups:
        model, _ = engine.instance_compute(g.instance_type)
        b = g.local_batch_high if g.ranks_high > 0 else g.local_batch_low
        fwd = model.forward_fixed_s + model.forward_per_sample_s * b
        bwd = model.backward_fixed_s + model.backward_per_sample_s * b
        total = fwd + bwd
        before = 0.0
        if prediction.accumulation_steps > 1 and math.isfinite(g.compute_s) and g.compute_s > total:
            before = g.compute_s - total  # the earlier micro-steps and their gradient adds (simulator.cpp)
        elif total > 0 and math.isfinite(g.compute_s):
            fwd, bwd = fwd * g.compute_s / total, bwd * g.compute_s / total
        out.append(Phases(before, fwd, bwd))
    return out


def timeline_figure(prediction: Prediction, *, phases: Sequence[Sequence[float]] | None = None,
                    title: str | None = None) -> Any:
    """One iteration on a time axis (ms): a lane per worker group with its forward and
    backward (after its earlier micro-steps under gradient accumulation), a lane with each
    gradient bucket's ring allreduce (ticks where each bucket is ready; empty on one GPU), and
    the optimizer step after the last allreduce.

    ``phases`` gives each group's :class:`Phases` (see :func:`phase_split`; a pair is
    (forward_s, backward_s)); without it each group's compute is one bar. A multi-GPU
    prediction needs ``timeline=True``."""
    if not prediction.feasible:
        raise ValueError(f"cannot draw a timeline: {prediction.cluster} does not run: {prediction.why_infeasible}")
    if not prediction.buckets and prediction.workers > 1:
        raise ValueError("prediction has no bucket timeline: call srift.predict(..., timeline=True)")
    ms = 1e3
    groups = list(prediction.groups)
    steps = prediction.accumulation_steps
    stream = "buffers, allreduce\n(one stream)" if getattr(prediction, "broadcast_s", 0.0) else "allreduce\n(one stream)"
    if prediction.workers == 1:
        stream = "allreduce\n(none: one GPU)"
    micro = f" x {steps} micro-steps" if steps > 1 else ""
    lanes = [f"{g.count}x {g.instance_type}\n{g.ranks}x {g.gpu}, batch "
             f"{g.local_batch_high if g.ranks_high else g.local_batch_low}{micro}" for g in groups] + [stream, "optimizer"]
    height = max(3.2, 1.0 + 0.75 * len(lanes))
    fig = _figure((FIGSIZE[0], height))
    ax = fig.add_subplot()
    y_of = {name: len(lanes) - 1 - i for i, name in enumerate(lanes)}
    bar_h = 0.55
    # DDP's buffer broadcast comes first and every rank's forward waits for it (simulator.hpp
    # note "buffer broadcast"): the bucket times already count from the iteration's start
    t0 = getattr(prediction, "broadcast_s", 0.0) or 0.0
    for i, g in enumerate(groups):
        y = y_of[lanes[i]]
        if phases is not None:
            before, fwd, bwd = phases[i] if len(phases[i]) == 3 else (0.0, *phases[i])
            start = t0 + before
            if before > 0:
                ax.broken_barh([(t0 * ms, before * ms)], (y - bar_h / 2, bar_h), facecolors="#B9C9DD",
                               edgecolor="white")
                if i == 0:
                    ax.text((t0 + before / 2) * ms, y, f"{steps - 1} earlier micro-step{'s' if steps > 2 else ''}",
                            ha="center", va="center", fontsize=8, color="#1F3B63")
            ax.broken_barh([(start * ms, fwd * ms)], (y - bar_h / 2, bar_h), facecolors="#8FB3DE", edgecolor="white")
            ax.broken_barh([((start + fwd) * ms, bwd * ms)], (y - bar_h / 2, bar_h), facecolors="#4C72B0",
                           edgecolor="white")
            if i == 0:
                ax.text((start + fwd / 2) * ms, y, "fwd", ha="center", va="center", fontsize=8, color="#1F3B63")
                ax.text((start + fwd + bwd / 2) * ms, y, "backward", ha="center", va="center", fontsize=8,
                        color="white")
        else:
            ax.broken_barh([(t0 * ms, g.compute_s * ms)], (y - bar_h / 2, bar_h), facecolors="#4C72B0",
                           edgecolor="white")
            ax.text((t0 + g.compute_s / 2) * ms, y, "forward + backward", ha="center", va="center", fontsize=8,
                    color="white")
    y = y_of[lanes[len(groups)]]
    if t0 > 0:
        ax.broken_barh([(0, t0 * ms)], (y - bar_h / 2, bar_h), facecolors="#8172B2", edgecolor="white")
        if t0 > 0.04 * prediction.iteration_s:
            ax.text(t0 / 2 * ms, y, "buffers", ha="center", va="center", fontsize=7, color="white")
    last_end = 0.0
    for k, b in enumerate(prediction.buckets):
        color = _COLORS[1] if k % 2 == 0 else "#C0622D"
        ax.broken_barh([(b.start_s * ms, (b.end_s - b.start_s) * ms)], (y - bar_h / 2, bar_h),
                       facecolors=color, edgecolor="white", linewidth=0.5)
        ax.plot([b.ready_s * ms] * 2, [y + bar_h / 2, y + bar_h / 2 + 0.18], color="#555555", linewidth=1)
        width = (b.end_s - b.start_s) * ms
        if width > 0.04 * prediction.iteration_s * ms:
            ax.text((b.start_s + b.end_s) / 2 * ms, y, f"b{k}\n{b.bytes / 2**20:.0f} MiB", ha="center",
                    va="center", fontsize=7, color="white")
        last_end = max(last_end, b.end_s)
    y_opt = y_of[lanes[-1]]
    opt_start = prediction.iteration_s - prediction.optimizer_s
    ax.broken_barh([(opt_start * ms, prediction.optimizer_s * ms)], (y_opt - bar_h / 2, bar_h),
                   facecolors=_COLORS[2], edgecolor="white")
    ax.axvline(prediction.iteration_s * ms, color="#333333", linestyle="--", linewidth=1)
    ax.text(prediction.iteration_s * ms, len(lanes) - 0.45, f" iteration {prediction.iteration_s * ms:.1f} ms",
            ha="right", va="bottom", fontsize=8)
    if prediction.exposed_comm_s > 0:
        compute_end = (t0 + prediction.compute_s + (getattr(prediction, "interference_s", 0.0) or 0.0)) * ms
        ax.axvspan(compute_end, last_end * ms, color="#C44E52", alpha=0.08, linewidth=0)
        middle, right = (compute_end + last_end * ms) / 2, prediction.iteration_s * ms
        near_end = middle > 0.8 * right  # centred there the label would run off the axes
        ax.text(right if near_end else middle, -0.75,
                f"exposed communication {prediction.exposed_comm_s * ms:.1f} ms", ha="right" if near_end else "center",
                va="center", fontsize=8, color="#C44E52")
    ax.set_yticks([y_of[name] for name in lanes], lanes, fontsize=8)
    ax.set_ylim(-1.1, len(lanes) - 0.1)
    ax.set_xlim(0, prediction.iteration_s * ms * 1.02)
    ax.set_xlabel("time within one iteration (ms); ticks: bucket gradients ready on every rank")
    ax.set_title(title or (f"{prediction.cluster} in {prediction.region}: global batch {prediction.global_batch}, "
                           f"{prediction.samples_per_s:,.0f} samples/s, bottleneck {prediction.bottleneck}"),
                 fontsize=10)
    ax.grid(True, axis="x", alpha=0.3)
    return fig


def save_timeline(prediction: Prediction, path: str | os.PathLike[str], **kwargs: Any) -> Path:
    path = check_path(path)
    timeline_figure(prediction, **kwargs).savefig(path)
    return path
