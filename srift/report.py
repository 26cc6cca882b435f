"""Rendering of results for people: aligned tables, units, plan tables and explanations.

Plain text everywhere; when ``use_rich(True)`` is set (the CLI does so only when stdout is a
terminal and rich is installed), tables are drawn with rich instead. Every function returns
a string, so the same text goes to a terminal, a pipe or a test.
"""
from __future__ import annotations

import math
import shutil
from typing import Any, Sequence

__all__ = ["table", "hours", "usd", "seconds", "rate", "gib", "percent", "use_rich",
           "plan_rows", "plan_table", "interval", "why_best", "explain_prediction", "prediction_text",
           "bottleneck_link"]

_RICH = False


def use_rich(enabled: bool) -> bool:
    """Draws tables with rich from now on (when it is importable); returns whether it is on."""
    global _RICH
    if enabled:
        try:
            import rich  # noqa: F401
        except ImportError:
            enabled = False
    _RICH = bool(enabled)
    return _RICH


# ---- units ----------------------------------------------------------------------------------
def _finite(value: Any) -> bool:
    return value is not None and isinstance(value, (int, float)) and math.isfinite(value)


def hours(value: float | None) -> str:
    if not _finite(value):
        return "-"
    if value < 1 / 60:  # under a minute: "0.0 min" said nothing
        return seconds(value * 3600)
    if value < 1:
        return f"{value * 60:.1f} min"
    if value < 48:
        return f"{value:.2f} h"
    return f"{value / 24:.1f} d"


def count(value: float | None) -> str:
    """An iteration count: whole numbers with thousands separators, a fraction kept ("0.5", not "0")."""
    if not _finite(value):
        return "-"
    return f"{value:,.0f}" if value == round(value) or value >= 1000 else f"{value:,.4g}"


def usd(value: float | None) -> str:
    if not _finite(value):
        return "-"
    if value >= 1:
        return f"${value:,.2f}"
    if 0 < value < 1e-4:  # two significant digits, never "$0.0000" for a cost that is not 0
        return f"${value:.{min(12, 1 - math.floor(math.log10(value)))}f}"
    return f"${value:.4f}"


def seconds(value: float | None) -> str:
    if not _finite(value):
        return "-"
    return f"{value * 1e3:.1f} ms" if value < 1 else f"{value:.3f} s"


def rate(value: float | None, unit: str = "/s") -> str:
    if not _finite(value):
        return "-"
    return f"{value:,.1f}{unit}"


def gib(value: float | None) -> str:
    return "-" if not _finite(value) else f"{value:.1f} GiB"


def data_size(n_bytes: float | None) -> str:
    """Bytes in the binary unit that reads best: 208 KiB, 48.0 MiB, 1.5 GiB."""
    if not _finite(n_bytes):
        return "-"
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20)):
        if n_bytes >= scale:
            return f"{n_bytes / scale:.1f} {unit}"
    return f"{n_bytes / 2**10:.0f} KiB" if n_bytes >= 2**10 else f"{n_bytes:.0f} B"


def flops(n: float | None) -> str:
    """FLOPs in the decimal unit that reads best: 8.18 GFLOP, 3.15 MFLOP (a small model's
    "0.00 GFLOP/sample" read as if nothing had been counted)."""
    if not _finite(n):
        return "-"
    for unit, scale in (("TFLOP", 1e12), ("GFLOP", 1e9), ("MFLOP", 1e6), ("kFLOP", 1e3)):
        if n >= scale:
            return f"{n / scale:.2f} {unit}"
    return f"{n:.0f} FLOP"


def percent(value: float | None) -> str:
    return "-" if not _finite(value) else f"{value * 100:.0f}%"


def chance(value: float | None, *thresholds: float) -> str:
    """A probability as a percentage with as few decimals (0-3) as keep it on its side of each
    threshold, and off 0% and 100% unless it is exactly that: 0.899 against 0.9 is "89.9%",
    not a "90%" that reads as meeting it; 0.9967 is "99.7%", not "100%"."""
    if not _finite(value):
        return "unknown"
    bounds = (*thresholds, 1.0)
    for digits in range(4):
        text = f"{value:.{digits}%}"
        shown = float(text[:-1]) / 100
        if all((shown < t) == (value < t) for t in bounds) and (shown > 0) == (value > 0):
            return text
    # three decimals still round onto a bound: say which side of it the value is
    if value > 0 and shown == 0:
        return "< 0.001%"
    crossed = min((t for t in bounds if value < t <= shown), default=None)
    if crossed == 1.0:
        return "> 99.999%"
    if crossed is not None:
        return f"< {crossed * 100:g}%"
    return f"> {min(t for t in bounds if shown < t <= value) * 100:g}%"


# ---- tables ---------------------------------------------------------------------------------
def table(rows: Sequence[Sequence[Any]], headers: Sequence[str], right: Sequence[int] = ()) -> str:
    """Columns padded to their widest cell; `right` lists right-aligned column indexes."""
    if _RICH:
        return _rich_table(rows, headers, right)
    cells = [[str(h) for h in headers]] + [[str(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]

    def line(row: list[str]) -> str:
        return "  ".join(c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths))).rstrip()

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([line(cells[0]), rule, *(line(r) for r in cells[1:])])


def _rich_table(rows: Sequence[Sequence[Any]], headers: Sequence[str], right: Sequence[int]) -> str:
    from rich import box
    from rich.console import Console
    from rich.table import Table

    t = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False)
    for i, h in enumerate(headers):
        t.add_column(str(h), justify="right" if i in right else "left", no_wrap=True)
    for row in rows:
        t.add_row(*(str(c) for c in row))
    console = Console(width=max(80, shutil.get_terminal_size((120, 24)).columns), force_terminal=True,
                      highlight=False)
    with console.capture() as capture:
        console.print(t)
    return capture.get().rstrip("\n")


# ---- plans ----------------------------------------------------------------------------------
def interval(prediction: Any, total_hours: float | None = None) -> str:
    """The predicted whole-run time, with its p10-p90 range when the prediction carries one
    (``p10_iteration_s`` / ``p90_iteration_s``, or ``iteration_p10_s`` / ``iteration_p90_s``)."""
    hours_value = total_hours if total_hours is not None else getattr(prediction, "total_hours", None)
    text = hours(hours_value)
    p10 = _first_attr(prediction, ("iteration_p10_s", "p10_iteration_s", "p10_s"))
    p90 = _first_attr(prediction, ("iteration_p90_s", "p90_iteration_s", "p90_s"))
    iteration_s = getattr(prediction, "iteration_s", None)
    if _finite(p10) and _finite(p90) and _finite(hours_value) and _finite(iteration_s) and iteration_s > 0:
        scale = hours_value / iteration_s
        low, high = hours(p10 * scale), hours(p90 * scale)
        unit = high.split(" ")[-1]
        if low.endswith(" " + unit):
            low = low[: -len(unit) - 1]  # "2.80-13.48 h" rather than "2.80 h-13.48 h"
        text += f" ({low}-{high})"
    return text


def _first_attr(obj: Any, names: Sequence[str]) -> Any:
    for name in names:
        value = getattr(obj, name, None)
        if value is not None:
            return value
    return None


PLAN_HEADERS = ["#", "type", "market", "region", "count", "GPUs", "time (p10-p90)", "total", "samples/s",
                "per 1k samples"]
PLAN_RIGHT = [0, 4, 5, 6, 7, 8, 9]


def plan_rows(plans: Sequence[Any]) -> list[tuple[Any, ...]]:
    """One row per instance group; the plan's figures on its first row only."""
    rows: list[tuple[Any, ...]] = []
    for i, p in enumerate(plans):
        groups = list(p.prediction.groups) or [None]
        for j, g in enumerate(groups):
            if g is None:  # should not happen for a searched plan; keep the row anyway
                cg = p.cluster.groups[0]
                kind, market, count, gpus = cg.instance_type, cg.market, cg.count, "-"
            else:
                kind, market, count = g.instance_type, g.market, g.count
                gpus = f"{g.ranks}x {g.gpu}"
            first = j == 0
            rows.append((i + 1 if first else "", kind, market, p.region if first else "", count, gpus,
                         interval(p.prediction, p.total_hours) if first else "",
                         usd(p.total_usd) if first else "", rate(p.samples_per_s) if first else "",
                         usd(p.usd_per_1k_samples) if first else ""))
    return rows


def plan_table(plans: Sequence[Any]) -> str:
    return table(plan_rows(plans), PLAN_HEADERS, right=PLAN_RIGHT)


def _pct(a: float, b: float) -> float:
    """How much smaller a is than b, as a fraction of b."""
    return (b - a) / b if b else 0.0


def _share(fraction: float) -> str:
    """A fraction as a percentage that never reads 0% for a difference that decided: "12%",
    "0.3%", "0.04%"."""
    if fraction == 0 or abs(fraction) >= 0.00995:
        return f"{fraction:.0%}"
    return f"{fraction * 100:.1g}%"


def _cluster_text(plan: Any) -> str:
    return " + ".join(str(g) for g in plan.cluster.groups)


def _same_instances(a: Any, b: Any) -> bool:
    return sorted(map(str, a.cluster.groups)) == sorted(map(str, b.cluster.groups))


def _broadcast_s(pred: Any) -> float:
    """DDP's buffer broadcast of a prediction, seconds (0 when absent or not a number: a
    prediction saved before srift modelled it)."""
    value = getattr(pred, "broadcast_s", 0.0)
    return value if _finite(value) else 0.0


def _seconds_pair(a: float, b: float) -> tuple[str, str]:
    """Two durations with as many digits as tell them apart ("1.02 ms vs 0.95 ms", not
    "1.0 ms vs 1.0 ms")."""
    for digits in (1, 2, 3, 4):
        pair = tuple(f"{v * 1e3:.{digits}f} ms" if v < 1 else f"{v:.{digits + 2}f} s" for v in (a, b))
        if pair[0] != pair[1] or a == b:
            return pair[0], pair[1]
    return pair[0], pair[1]


def _interference_s(pred: Any) -> float:
    value = getattr(pred, "interference_s", 0.0)
    return value if _finite(value) else 0.0


def _speed_reason(faster: Any, slower: Any) -> str:
    """Why one prediction's iteration is shorter than another's, in a few words: the part of
    the iteration (compute, exposed communication, buffer broadcast, optimizer step,
    interference) that differs most in its favour."""
    f, s = faster.prediction, slower.prediction
    parts = {"compute": s.compute_s - f.compute_s, "comm": s.exposed_comm_s - f.exposed_comm_s,
             "buffers": _broadcast_s(s) - _broadcast_s(f), "optimizer": s.optimizer_s - f.optimizer_s,
             "interference": _interference_s(s) - _interference_s(f)}
    part = max(parts, key=lambda k: parts[k])
    if part == "buffers":
        mine, theirs = _seconds_pair(_broadcast_s(f), _broadcast_s(s))
        return f"DDP's buffer broadcast takes {theirs} per iteration on the runner-up vs {mine}"
    if part == "comm":
        mine, theirs = _seconds_pair(f.exposed_comm_s, s.exposed_comm_s)
        return f"{s.bottleneck} communication exposes {theirs} per iteration on the runner-up vs {mine}"
    if part == "optimizer":
        mine, theirs = _seconds_pair(f.optimizer_s, s.optimizer_s)
        return f"its optimizer step takes {mine} vs {theirs} on the runner-up"
    if part == "interference":
        mine, theirs = _seconds_pair(_interference_s(f), _interference_s(s))
        return f"collectives take {mine} of compute on shared cores vs {theirs} on the runner-up"
    mine, theirs = _seconds_pair(f.compute_s, s.compute_s)
    if f.workers != s.workers:
        return (f"{'its GPU computes' if f.workers == 1 else f'its {f.workers} GPUs compute'} each iteration "
                f"in {mine} vs {theirs} on {s.workers}")
    return f"compute takes {mine} per iteration vs {theirs}"


def _time_reason(best: Any, runner_up: Any) -> str:
    """Why ``best`` finishes sooner: its iterations (_speed_reason), or, where spot plans are
    compared, less time lost to preemption when that is most of the difference."""
    if best.uses_spot or runner_up.uses_spot:
        lost = best.total_hours - best.nominal_hours
        lost_other = runner_up.total_hours - runner_up.nominal_hours
        if lost_other - lost > runner_up.nominal_hours - best.nominal_hours:
            if not best.uses_spot:
                return f"it is on demand, while preemption costs the runner-up {hours(lost_other)}"
            return f"preemption costs it {hours(lost)} where it costs the runner-up {hours(lost_other)}"
    return _speed_reason(best, runner_up)


def why_best(best: Any, alternatives: Sequence[Any], objective: str, top_k: int | None = None) -> str:
    """One line on why ``best`` beat the runner-up under ``objective`` ("min_cost" or
    "max_throughput"). The runner-up is the best alternative with other instances; the same
    instances in another region are mentioned only when they tie. ``top_k``: how many plans
    the search was asked for (1: no alternatives were asked for, so none shown says nothing of
    whether others meet the constraints)."""
    others = [p for p in alternatives if not _same_instances(best, p)]
    twins = [p for p in alternatives if _same_instances(best, p)]
    tie_note = ""
    if twins:
        twin = twins[0]
        key = (lambda p: p.total_usd) if objective == "min_cost" else (lambda p: -p.samples_per_s)
        if abs(key(twin) - key(best)) <= 5e-4 * abs(key(best)):
            tie_note = f"; the same instances tie in {twin.region}"
    if not others:
        if twins:  # the runner-up is the twin itself: its line says the tie already
            return _versus(best, twins[0], objective)
        if top_k == 1:
            return (f"the {'cheapest' if objective == 'min_cost' else 'fastest'} plan that meets the constraints "
                    "(no runner-up was asked for, so none is compared)")
        return "the only plan that meets the constraints"
    return _versus(best, others[0], objective) + tie_note


def _versus(best: Any, runner_up: Any, objective: str) -> str:
    other = f"{_cluster_text(runner_up)} in {runner_up.region}"
    if objective == "min_cost":
        saving = _pct(best.total_usd, runner_up.total_usd)
        if _same_instances(best, runner_up):
            if abs(saving) < 5e-4:
                return f"ties with the same instances in {runner_up.region} ({usd(best.total_usd)} each)"
            return (f"{_share(saving)} cheaper than the same instances in {runner_up.region} because "
                    f"{best.region} prices them at {usd(best.usd_per_hour)}/h vs {usd(runner_up.usd_per_hour)}/h")
        if abs(saving) < 5e-4:  # within 0.05%: both prices as the table prints them
            mine, theirs = usd(best.total_usd), usd(runner_up.total_usd)
            cost = mine if mine == theirs else f"{mine} vs {theirs}"
            if best.total_hours <= runner_up.total_hours:
                return f"ties on cost with {other} ({cost}) and finishes no later"
            by = f", cheaper by {_share(saving)}," if saving > 0 else ""
            later = best.total_hours / runner_up.total_hours - 1 if runner_up.total_hours else 0.0
            return f"ties on cost with {other} ({cost}){by} though it finishes {_share(later)} later"
        rate_saving = _pct(best.usd_per_hour, runner_up.usd_per_hour)
        time_saving = _pct(best.total_hours, runner_up.total_hours)
        same_rate, same_time = abs(rate_saving) < 5e-4, abs(time_saving) < 5e-4
        head = (f"{saving:.1%} cheaper than {other} ({usd(best.total_usd)} vs {usd(runner_up.total_usd)}) "
                f"because ")
        rates = f"({usd(best.usd_per_hour)}/h vs {usd(runner_up.usd_per_hour)}/h)"
        if same_time and rate_saving > 0:
            return head + f"it runs as fast and costs {_share(rate_saving)} less per hour {rates}"
        if same_rate and time_saving > 0:
            return head + (f"it finishes {_share(time_saving)} sooner at the same hourly rate "
                           f"({_time_reason(best, runner_up)})")
        if rate_saving >= 0 and time_saving >= 0:
            return head + (f"it is both {_share(time_saving)} faster and {_share(rate_saving)} cheaper per hour "
                           f"({_time_reason(best, runner_up)})")
        if rate_saving >= 0:
            return head + (f"its hourly rate is {_share(rate_saving)} lower {rates}, which outweighs running "
                           f"{_share(-time_saving)} longer")
        return head + (f"it finishes {_share(time_saving)} sooner, which outweighs a {_share(-rate_saving)} higher "
                       f"hourly rate ({_time_reason(best, runner_up)})")
    if best.uses_spot or runner_up.uses_spot:
        # The search ranks by expected time under preemption, not by the uninterrupted speed.
        sooner = _pct(best.total_hours, runner_up.total_hours)
        if abs(sooner) >= 5e-4:
            return (f"finishes {sooner:.1%} sooner than {other} in expectation ({hours(best.total_hours)} vs "
                    f"{hours(runner_up.total_hours)} with preemption) because {_time_reason(best, runner_up)}")
    gain = best.samples_per_s / runner_up.samples_per_s - 1 if runner_up.samples_per_s else 0.0
    if abs(gain) < 5e-4:
        if _same_instances(best, runner_up):
            return f"ties with the same instances in {runner_up.region}; {best.region} costs {usd(best.total_usd)}"
        return f"ties on throughput with {other}; it costs {usd(best.total_usd)} vs {usd(runner_up.total_usd)}"
    return (f"{gain:.1%} more samples/s than {other} ({rate(best.samples_per_s)} vs "
            f"{rate(runner_up.samples_per_s)}) because {_speed_reason(best, runner_up)}")


# ---- one prediction -------------------------------------------------------------------------
def _batch_text(g: Any) -> str:
    if g.ranks_high in (0, g.ranks) or g.local_batch_low == g.local_batch_high:
        return str(g.local_batch_high if g.ranks_high == g.ranks else g.local_batch_low)
    return f"{g.local_batch_low}-{g.local_batch_high} ({g.ranks_high} ranks at {g.local_batch_high})"


def _no_link_reason(pred: Any) -> str:
    if pred.workers <= 1:
        return "one GPU"
    return "its allreduce is inside the whole-instance measurement"


def prediction_text(pred: Any) -> str:
    """The iteration breakdown of one prediction: per group compute and memory, then the
    iteration split into compute, exposed communication and optimizer, then cost."""
    if not pred.feasible:
        return f"{pred.cluster} in {pred.region}: does not run: {pred.why_infeasible}"
    rows = [(g.instance_type, g.market, g.count, g.gpu, g.ranks, _batch_text(g), seconds(g.compute_s),
             f"{g.memory_gib:.1f}/{g.gpu_memory_gib:.0f} GiB", gib(g.gpu_memory_gib - g.memory_gib),
             g.compute_source)
            for g in pred.groups]
    slowest = max(pred.groups, key=lambda g: g.compute_s if _finite(g.compute_s) else -1.0)
    lines = [f"{pred.cluster} in {pred.region}, global batch {pred.global_batch}, {pred.precision}",
             table(rows, ["instance", "market", "count", "gpu", "ranks", "local batch", "compute",
                          "memory", "headroom", "compute from"], right=[2, 4, 6, 8]),
             "",
             f"iteration        {seconds(pred.iteration_s)}  ({rate(pred.samples_per_s, ' samples/s')})"
             + (f"  p10-p90 {seconds(pred.iteration_p10_s)}-{seconds(pred.iteration_p90_s)}"
                if _finite(getattr(pred, "iteration_p10_s", math.nan))
                and _finite(getattr(pred, "iteration_p90_s", math.nan)) else ""),
             f"  compute        {seconds(pred.compute_s)}  (slowest group: {slowest.instance_type})",
             *([f"  accumulation   {pred.accumulation_steps} micro-steps of up to {pred.micro_batch} samples "
                + (f"(the global batch is more than the GPUs run at once under their memory and "
                   f"max_local_batch = {pred.local_batch_cap}; local batches are per micro-step)"
                   if getattr(pred, "local_batch_cap", None) else
                   "(the global batch does not fit GPU memory at once; local batches are per micro-step)")]
               if getattr(pred, "accumulation_steps", 1) > 1 else []),
             f"  exposed comm   {seconds(pred.exposed_comm_s)} of {seconds(pred.comm_s)} allreduce "
             + (f"(bottleneck: {pred.bottleneck}, {pred.ring_gbytes_s:.1f} GB/s)" if pred.bottleneck != "none"
                else f"(no link: {_no_link_reason(pred)})"),
             *([f"  interference   {seconds(pred.interference_s)}  (compute lost to collectives on shared cores)"]
               if _finite(pred.interference_s) and pred.interference_s > 0 else []),
             *([f"  buffers        {seconds(pred.broadcast_s)}  (DDP broadcasts rank 0's buffers before the forward)"]
               if _broadcast_s(pred) > 0 else []),
             f"  optimizer      {seconds(pred.optimizer_s)}",
             f"cost             {usd(pred.usd_per_hour)}/h, {usd(pred.usd_per_1k_samples)} per 1k samples"]
    if pred.iterations is not None:
        lines.append(f"whole run        {interval(pred)}, {usd(pred.total_usd)} "
                     f"for {count(pred.iterations)} iterations")
        if any(g.market == "spot" for g in pred.groups):
            # recommend prices the same plan at its expected time under preemption: say why they differ
            lines.append("                 (spot: uninterrupted; recommend and pareto add the expected "
                         "preemption, restarts and checkpoints)")
    return "\n".join(lines)


def bottleneck_link(pred: Any, catalog: Any | None = None) -> str:
    """The link that bounds the ring: kind and achieved speed, and with a catalog the
    instance type whose NIC (or intra-node link) it is: the group the simulator took the ring's
    bandwidth from (``pred.bottleneck_group``), whose achieved speed is ``ring_gbytes_s``.
    A probed link (measured_network_gbytes_s / measured_intra_gbytes_s) is said to be one."""
    if pred.bottleneck == "none":
        return f"none ({_no_link_reason(pred)})"
    text = f"{pred.bottleneck} at {pred.ring_gbytes_s:.1f} GB/s achieved"
    if catalog is None or pred.bottleneck not in ("network", "intra-node"):
        return text
    try:
        infos = [catalog.instance(g.instance_type) for g in pred.groups]
    except (ValueError, IndexError, KeyError):
        return text
    if not infos:
        return text
    index = getattr(pred, "bottleneck_group", -1)
    known = isinstance(index, int) and not isinstance(index, bool) and 0 <= index < len(infos)
    if pred.bottleneck == "network":
        if known:
            slow = infos[index]
        else:  # a prediction without the simulator's group (built by hand): the slowest nominal NIC
            slow = min(infos, key=lambda i: i.network_gbps)
        probed = ", probed" if getattr(slow, "measured_network_gbytes_s", None) else ""
        if probed and getattr(slow, "measured_network_over", None) == "loopback":
            return text + (f" (the network link of {slow.name} as probed over loopback on one host, not its "
                           f"{slow.network_gbps:g} Gbit/s NIC{', EFA' if slow.efa else ''})")
        return text + f" (the {slow.network_gbps:g} Gbit/s NIC of {slow.name}{', EFA' if slow.efa else ''}{probed})"
    pairs = list(zip(infos, pred.groups))
    if known:
        slow = infos[index]
    else:
        # the slowest achieved link inside an instance (learned or probed links reorder the nominal ones)
        def achieved(pair: tuple[Any, Any]) -> float:
            info, group = pair
            return group.intra_gbytes_s if math.isfinite(group.intra_gbytes_s) else info.intra_node_gbytes_s or 0.0

        slow, _ = min([p for p in pairs if p[0].gpu_count > 1] or pairs, key=achieved)
    probed = ", probed" if getattr(slow, "measured_intra_gbytes_s", None) else ""
    return text + f" ({slow.interconnect} inside {slow.name}{probed})"


def loopback_network_lines(pred: Any, catalog: Any | None) -> list[str]:
    """A line per instance type of a cluster spanning several instances whose network link was
    probed over loopback (catalog `measured_network_over: "loopback"`, `srift probe-network
    --loopback`): the ring across instances runs at that figure, which is not the NIC's."""
    if catalog is None or sum(g.count for g in pred.groups) < 2:
        return []
    lines = []
    for name in dict.fromkeys(g.instance_type for g in pred.groups):
        try:
            info = catalog.instance(name)
        except (ValueError, IndexError, KeyError):
            continue
        if info.measured_network_gbytes_s and getattr(info, "measured_network_over", None) == "loopback":
            lines.append(f"network link of {info.name}: {info.measured_network_gbytes_s:.3g} GB/s probed over loopback "
                         f"on one host (srift probe-network --loopback), not across its {info.network_gbps:g} Gbit/s "
                         "NIC; probe across instances (--distributed) for the NIC's")
    return lines


def _same_specs_lines(pred: Any) -> list[str]:
    """A line per GPU type predicted as a measured GPU type with its specs (srift::LearnedCompute
    note "same specs"): why its compute is a measurement although it was not measured."""
    same = sorted({(g.gpu, g.instance_type) for g in pred.groups if g.compute_source == "measured-same-specs"})
    return [f"same specs: {gpu} on {instance_type} has the peaks and memory bandwidth of a GPU type the profile "
            f"measured, so its compute is that type's measured curve (not the cross-GPU ratio), its band widening "
            f"away from the measured batch as the measured type's own" for gpu, instance_type in same]


def _past_edge_lines(pred: Any, catalog: Any | None) -> list[str]:
    """A line per GPU type predicted past the data's edge (srift.learn.data_edge note "data
    edge"): its launch year, the models' newest, and the lean its compute carries."""
    past = sorted({(g.gpu, g.instance_type) for g in pred.groups if g.compute_source == "learned-past-edge"})
    if not past:
        return []
    from srift.learn import default_models

    edge_year, anchored, absolute = default_models().data_edge()
    out = []
    for gpu, instance_type in past:
        year = getattr(catalog.gpu(gpu), "launch_year", None) if catalog is not None else None
        out.append(f"past the data: {gpu} on {instance_type}" + (f" (announced {year})" if year else "")
                   + f" is newer than every GPU the compute models learned from (to {edge_year}); held out year by "
                   f"year, each new generation ran slower than the models said, so its compute carries that lean "
                   f"(x{math.exp(absolute[1]):.2f} with no measurement, x{math.exp(anchored[1]):.2f} anchored on an "
                   f"older GPU, the inverse anchored from it; never slower than a GPU it beats on every spec) "
                   f"and the band of those years' residuals")
    return out


def precision_notes(pred: Any, catalog: Any | None) -> list[str]:
    """What the precision asked for does on a GPU without its units (a K80 or M60 has no FP16
    units, a T4 or V100 no TF32): the run is legal PyTorch, and predicted as such, but a user
    picking `--precision tf32` for a T4 or `amp` for a K80 should hear that the GPU cannot speed
    it up (the catalog's peaks: srift/data/gpu_specs.csv)."""
    if catalog is None or not getattr(pred, "feasible", False) or pred.precision not in ("tf32", "amp"):
        return []
    lacking: list[str] = []
    for g in pred.groups:
        try:
            spec = catalog.gpu(g.gpu)
        except (KeyError, ValueError):
            continue
        units = spec.tf32_tflops if pred.precision == "tf32" else spec.fp16_tflops
        if units is None and g.gpu not in lacking:
            lacking.append(g.gpu)
    if not lacking:
        return []
    names = ", ".join(lacking)
    if pred.precision == "tf32":
        return [f"note: {names} {'has' if len(lacking) == 1 else 'have'} no TF32 units: "
                "torch.set_float32_matmul_precision('high') changes nothing there, and tf32 runs as fp32"]
    return [f"note: {names} {'has' if len(lacking) == 1 else 'have'} no FP16 units: autocast saves memory "
            "and bandwidth there but runs its FP16 math no faster than FP32 (docs/accuracy.md, "
            "\"AMP on a GPU without FP16 units\")"]


def torch_lines(pred: Any) -> list[str]:
    """The official PyTorch wheels that run the prediction's cluster, or why none does
    (srift.torch_support); none when the check is off."""
    from srift.torch_support import describe

    line = describe(pred)
    return [line] if line else []


def explain_prediction(pred: Any, catalog: Any | None = None) -> str:
    """``prediction_text`` plus where the iteration's time goes, as shares, the link that
    bounds the allreduce and the tightest memory headroom."""
    text = prediction_text(pred)
    if not pred.feasible or not _finite(pred.iteration_s) or pred.iteration_s <= 0:
        return text
    it = pred.iteration_s
    hidden = pred.comm_s - pred.exposed_comm_s
    tightest = min(pred.groups, key=lambda g: g.gpu_memory_gib - g.memory_gib)
    extra = [
        "",
        f"where the time goes: compute {percent(pred.compute_s / it)}, exposed communication "
        f"{percent(pred.exposed_comm_s / it)}, "
        + (f"buffer broadcast {percent(pred.broadcast_s / it)}, " if _broadcast_s(pred) > 0 else "")
        + (f"interference {percent(_interference_s(pred) / it)}, " if _interference_s(pred) > 0 else "")
        + f"optimizer {percent(pred.optimizer_s / it)}; "
        f"{seconds(hidden)} of allreduce hides behind the backward",
        f"bottleneck link: {bottleneck_link(pred, catalog)}",
        *([f"p10-p90 band from: {'; '.join(pred.band_from)}"
           + (" (compute and the widest link part add in quadrature)" if len(pred.band_from) > 1 else "")]
          if getattr(pred, "band_from", None) else []),
        *_same_specs_lines(pred),
        *_past_edge_lines(pred, catalog),
        *loopback_network_lines(pred, catalog),
        *precision_notes(pred, catalog),
        *torch_lines(pred),
        f"memory: tightest GPU is {tightest.gpu} on {tightest.instance_type} with "
        f"{gib(tightest.gpu_memory_gib - tightest.memory_gib)} free; "
        + (f"local batch up to {tightest.max_local_batch} allowed (max_local_batch)"
           if tightest.max_local_batch == getattr(pred, "local_batch_cap", None) else
           f"the whole global batch ({pred.global_batch}) would fit on one"
           if tightest.max_local_batch >= pred.global_batch else
           f"local batch up to {tightest.max_local_batch} fits"),
    ]
    return text + "\n" + "\n".join(extra)
