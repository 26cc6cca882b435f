"""Lambda's v2 benchmark tables (srift.learn.lambda_v2 notes "v2 rows", "v2 batches", "past the edge")."""
from __future__ import annotations

from pathlib import Path
from statistics import median

import pytest
from measured_data import MEASURED

from srift.learn.lambda_v2 import NEWEST_CHIPS, PER_GPU_BATCH, V2Host, parse_host, v2_rows

needs_data = pytest.mark.skipif(not (MEASURED / "lambda_v2_fp16_hosts.csv").is_file(),
                                reason=f"Lambda's v2 tables not present at {MEASURED}")


@pytest.mark.parametrize("name, gpu, gpus", [
    ("LambdaOD_2x_Texas_1xH100_80GB_SXM5_192-222-52-120_v2", "H100-80GB", 1),  # one GPU of a 2-GPU machine
    ("LambdaOD_8x_Texas_8xH100_80GB_SXM5_192-222-52-89_v2", "H100-80GB", 8),
    ("LambdaOD_1x_Texas_1xH100_80GB_PCIe_209-20-158-50_v2", "H100-PCIe", 1),
    ("LambdaBM_ENG04_HTOff_1xH200_140GB_SXM_h200_v2", "H200-141GB", 1),
    ("ASUS_8xH200_140GB_SXM_lambda-scalar_v2", "H200-141GB", 8),
    ("LambdaOD_1x_1xGH200_96GB_192-222-57-0_v2", "GH200-96GB", 1),
    ("LambdaOD_test_4xB200_192GB_129-213-83-251_v2", "B200", 4),
])
def test_hosts_name_their_gpu_and_count(name: str, gpu: str, gpus: int) -> None:
    assert parse_host(name) == V2Host(name, gpu, gpus)


@pytest.mark.parametrize("name", [
    "LambdaOD_1x_1xGH200_80GB_192-222-58-35_v2",          # no such GH200 on NVIDIA's datasheets
    "LambdaOD_1x_Test_1xGH200_96GB_192-222-56-184_v2",    # ran the 80 GB host's config
    "LambdaOD_1x_Test_1xGH200_96GB_192-222-56-184_v2_bk",  # a copy of another host's results
    "LambdaCloud 1x A10", "",
])
def test_hosts_srift_cannot_place_are_left_out(name: str) -> None:
    assert parse_host(name) is None


def test_every_gpu_has_a_batch_per_model_at_both_precisions() -> None:
    from srift.learn.gpus import TRAINING_GPUS

    gpus = {g for g, _ in PER_GPU_BATCH}
    assert gpus <= set(TRAINING_GPUS) and NEWEST_CHIPS <= gpus
    for g in gpus:
        assert PER_GPU_BATCH[(g, "amp")].keys() == PER_GPU_BATCH[(g, "tf32")].keys() == {
            "ssd", "bert_base_squad", "bert_large_squad", "resnet50"}
        # Lambda sizes the batch to the memory: AMP's is larger than FP32's on every GPU
        assert all(PER_GPU_BATCH[(g, "amp")][m] > PER_GPU_BATCH[(g, "tf32")][m] for m in PER_GPU_BATCH[(g, "amp")])


def _table(tmp_path: Path, name: str, rows: list[str]) -> None:
    (tmp_path / name).write_text(",ssd,bert_base_squad,gnmt,resnet50\n" + "\n".join(rows) + "\n")


def test_rows_take_the_batch_of_their_gpu_and_skip_what_cannot_be_used(tmp_path: Path) -> None:
    _table(tmp_path, "lambda_v2_fp16_hosts.csv", [
        "LambdaOD_test_1xB200_192GB_x_v2,1025.0,1405.0,852308.0,0.0",    # resnet50 did not run
        "LambdaOD_test_8xB200_192GB_x_v2,8148.0,30221.0,6725418.0,24461.0",  # 8 GPUs
        "LambdaOD_1x_1xGH200_80GB_x_v2,918.0,840.0,536983.0,2846.0",
    ])
    rows = v2_rows(tmp_path)  # no FP32 table: its rows are simply absent
    assert [(h.gpu, p, m, b, t) for h, p, m, b, t in rows] == [
        ("B200", "amp", "ssd", 1152.0, 1025.0), ("B200", "amp", "bert_base_squad", 768.0, 1405.0)]
    assert len(v2_rows(tmp_path, gpus=None)) == 2 + 3 and len(v2_rows(tmp_path, gpus=8)) == 3
    assert v2_rows(tmp_path / "nothing here") == []


@needs_data
def test_v2_h100_cells_repeat_the_v1_rows_and_new_gpus_join_lambdas_groups() -> None:
    from srift.learn.datasets import _lambda_throughputs, compute_rows

    v1 = _lambda_throughputs(MEASURED, v2=False)
    both = _lambda_throughputs(MEASURED)
    for key, thr in v1.items():
        if key[0] == "H100-80GB" and key[1] in PER_GPU_BATCH[("H100-80GB", key[2])]:
            # the same benchmark at the same batch: the fleet's median is v1's within 3%
            v2_only = both[key][len(thr):]
            assert len(v2_only) >= 20 and abs(median(v2_only) / median(thr) - 1) < 0.03
    rows = [r for r in compute_rows(MEASURED) if r.source == "lambda"]
    for gpu in NEWEST_CHIPS:
        mine = [r for r in rows if r.gpu == gpu]
        lambda_names = {"ssd300": "ssd", "bert_base": "bert_base_squad", "bert_large": "bert_large_squad",
                        "resnet50": "resnet50"}
        assert len(mine) == 8 and {(r.workload, r.precision) for r in mine} == {
            (wl, p) for wl in lambda_names for p in ("amp", "tf32")}
        # in the v1 rows' groups, so every v1 GPU anchors them and they anchor every v1 GPU
        assert all(r.group == f"lambda/{lambda_names[r.workload]}/{r.precision}" for r in mine)
        # a B200 or H200 is faster than the H100 SXM5 on every model at its larger batch; GH200,
        # the H100's compute sharing its module's power with a Grace CPU, is within 15% of it
        for r in mine:
            h100 = next(x for x in rows if x.gpu == "H100-80GB" and x.group == r.group)
            assert r.per_sample_s < h100.per_sample_s * (1.15 if gpu == "GH200-96GB" else 1.0)


@needs_data
def test_the_noise_band_keeps_to_the_v1_repeats() -> None:
    from srift.learn.datasets import _lambda_throughputs, lambda_repeats

    assert lambda_repeats(MEASURED) == _lambda_throughputs(MEASURED, v2=False)


def test_the_generation_split_holds_the_newest_gpus_out_together() -> None:
    from srift.learn.datasets import ComputeRow
    from srift.learn.lambda_v2 import NEWEST_GROUP
    from srift.learn.train import _split_key, held_out_chips

    def row(gpu: str) -> ComputeRow:
        return ComputeRow("lambda", "bert_base", gpu, "amp", 64.0, 1e-3, True, "lambda/bert_base_squad/amp")

    assert _split_key((row("H100-80GB"), row("B200")), "generation") == ({"H100", NEWEST_GROUP}, NEWEST_GROUP)
    assert _split_key((row("B200"), row("A10")), "generation") == ({NEWEST_GROUP, "A10"}, "A10")
    assert held_out_chips(NEWEST_GROUP, "generation") == set(NEWEST_CHIPS)
    assert held_out_chips("A10", "generation") == held_out_chips("A10", "chip") == {"A10"}
    assert held_out_chips("bert", "model") == set()
    with pytest.raises(ValueError, match="by: expected 'chip', 'forward', 'generation', 'model' or 'source', got 'gpu'"):
        _split_key((None, row("B200")), "gpu")


@pytest.mark.parametrize("cell, why", [("fast", "expected a throughput, got 'fast'"),
                                       ("inf", "expected a finite throughput, got 'inf'")])
def test_a_cell_that_is_no_throughput_names_its_host_and_column(tmp_path: Path, cell: str, why: str) -> None:
    _table(tmp_path, "lambda_v2_fp32_hosts.csv", [f"LambdaOD_test_1xB200_192GB_x_v2,1043.0,{cell},1.0,2967.0"])
    with pytest.raises(ValueError, match=f"lambda_v2_fp32_hosts.csv: host 'LambdaOD_test_1xB200_192GB_x_v2', "
                                         f"column 'bert_base_squad': {why}"):
        v2_rows(tmp_path)


def test_the_forward_split_trains_only_on_older_gpus() -> None:
    """train.py note "forward": a pair leaves training whenever a year it touches is held out."""
    from srift.learn.datasets import ComputeRow
    from srift.learn.train import _split_key, held_out_chips

    def row(gpu: str, source: str = "lambda") -> ComputeRow:
        return ComputeRow(source, "bert_base", gpu, "amp", 64.0, 1e-3, True, "lambda/bert_base_squad/amp")

    touched, group = _split_key((row("V100-16GB"), row("H100-80GB")), "forward")
    assert group == "2022" and touched == {"0", "2014", "2016", "2017", "2018", "2020", "2021", "2022"}
    # held out 2020, a V100 -> H100 pair is out of training (it touches 2022); an older pair is in
    assert "2020" in touched and "2018" not in _split_key((row("K80"), row("V100-32GB")), "forward")[0]
    assert _split_key((None, row("B200")), "forward")[1] == "2024"
    assert _split_key((None, row("cpu-1t", "cpu")), "forward") == ({"0"}, "0")
    assert held_out_chips("2023", "forward") == {"H200-141GB", "GH200-96GB", "B200"}
    assert "K80" not in held_out_chips("2016", "forward") and "P100" in held_out_chips("2016", "forward")
