"""Peaks of the GPUs that appear in the training data but not (all) in the EC2 catalog.

Dense (no sparsity) datasheet figures per GPU, TFLOP/s and GB/s. ``fp16`` is the tensor-core
peak with FP32 accumulation, the mode torch.autocast uses: GeForce parts run it at half the
rate of their FP16-accumulate figure, which is the one their marketing quotes. GPUs the
catalog knows are taken from the catalog at prediction time; this table exists so that the
training rows (Lambda, Gavel, Sia) can be featurised without it.
"""
from __future__ import annotations

from dataclasses import dataclass

__all__ = ["GpuPeaks", "TRAINING_GPUS", "DATA_GPU_NAMES", "CHIP_LAUNCH_YEAR", "peaks_from_catalog"]


@dataclass(frozen=True)
class GpuPeaks:
    key: str
    fp32_tflops: float
    tf32_tflops: float | None
    fp16_tflops: float | None  # tensor (or packed FP16) peak with FP32 accumulation
    memory_gbytes_s: float
    memory_gib: float
    launch_year: int = 0  # announced; 0: unknown (srift.learn.data_edge note "data edge")

    def peak_tflops(self, precision: str) -> float:
        """Peak that matmuls/convs run against at `precision` (fp32 | tf32 | amp)."""
        if precision == "amp" and self.fp16_tflops:
            return self.fp16_tflops
        if precision in ("tf32", "amp") and self.tf32_tflops:
            return self.tf32_tflops
        return self.fp32_tflops


_ROWS = [
    # key, fp32, tf32, fp16 (fp32 acc), GB/s, GiB  -- NVIDIA datasheets / whitepapers
    ("K80", 4.37, None, None, 240.0, 12.0),          # per GK210 die
    ("P100", 9.3, None, 18.7, 732.0, 16.0),          # PCIe; packed FP16, no tensor cores
    ("V100-16GB", 15.7, None, 125.0, 900.0, 16.0),   # SXM2
    ("V100-32GB", 15.7, None, 125.0, 900.0, 32.0),
    ("RTX2080Ti", 13.4, None, 53.8, 616.0, 11.0),    # Turing whitepaper, FP32-acc tensor
    ("QuadroRTX6000", 16.3, None, 130.5, 672.0, 24.0),
    ("QuadroRTX8000", 16.3, None, 130.5, 672.0, 48.0),
    ("RTX3090", 35.6, 35.6, 71.0, 936.0, 24.0),      # GA102 whitepaper, FP32-acc
    ("A10", 31.2, 62.5, 125.0, 600.0, 24.0),
    ("RTXA6000", 38.7, 77.4, 154.8, 768.0, 48.0),
    ("A100-40GB-PCIe", 19.5, 156.0, 312.0, 1555.0, 40.0),
    ("A100-40GB", 19.5, 156.0, 312.0, 1555.0, 40.0),
    ("A100-80GB-PCIe", 19.5, 156.0, 312.0, 1935.0, 80.0),
    ("A100-80GB", 19.5, 156.0, 312.0, 2039.0, 80.0),
    ("RTX4090", 82.6, 82.6, 165.2, 1008.0, 24.0),    # Ada whitepaper, FP32-acc
    ("RTX6000Ada", 91.1, 182.1, 364.2, 960.0, 48.0),
    ("H100-PCIe", 51.2, 378.0, 756.0, 2000.0, 80.0),
    ("H100-80GB", 67.0, 494.7, 989.4, 3350.0, 80.0),
    # Lambda's v2 benchmark hosts (srift.learn.lambda_v2): H200 and B200 as the catalog has them
    # (p5e/p5en, p6-b200), and GH200's GPU, the H100 SXM's compute with 96 GB of HBM3 at 4.0 TB/s
    ("H200-141GB", 67.0, 494.7, 989.4, 4800.0, 141.0),
    ("GH200-96GB", 67.0, 494.7, 989.4, 4000.0, 96.0),
    ("B200", 75.0, 1100.0, 2250.0, 8000.0, 179.0),
]
TRAINING_GPUS: dict[str, GpuPeaks] = {r[0]: GpuPeaks(*r) for r in _ROWS}

# Year NVIDIA announced each chip of the training data (srift.learn.datasets.chip_of names), for
# the split that trains only on GPUs older than the one it predicts (train.py note "forward").
CHIP_LAUNCH_YEAR: dict[str, int] = {
    "K80": 2014, "P100": 2016, "V100": 2017, "RTX2080Ti": 2018, "QuadroRTX": 2018, "A100": 2020,
    "RTX3090": 2020, "RTXA6000": 2020, "A10": 2021, "RTX4090": 2022, "RTX6000Ada": 2022, "H100": 2022,
    "H200-141GB": 2023, "GH200-96GB": 2023, "B200": 2024,
}

# Names used by the measured data -> keys above.
DATA_GPU_NAMES: dict[str, str] = {
    "k80": "K80", "p100": "P100", "v100": "V100-16GB",
    "Quadro RTX 8000": "QuadroRTX8000", "LambdaCloud V100 16GB": "V100-16GB",
    "RTX 3090": "RTX3090", "LambdaCloud A10": "A10", "LambdaCloud A100 40GB PCIe": "A100-40GB-PCIe",
    "A100 80GB PCIe": "A100-80GB-PCIe", "A100 80GB SXM4": "A100-80GB", "RTX 6000 Ada": "RTX6000Ada",
    "RTX A6000": "RTXA6000", "RTX 4090": "RTX4090", "H100 80GB PCIe Gen5": "H100-PCIe",
    "LambdaCloud H100 80GB PCIe Gen5": "H100-PCIe", "H100 80GB SXM5": "H100-80GB",
    "azure": "V100-32GB", "dgx": "A100-40GB", "dgx-ext": "A100-40GB", "rtx": "RTX2080Ti",
    "quad": "QuadroRTX6000",
}


def peaks_from_catalog(catalog: object, key: str) -> GpuPeaks:
    """GpuPeaks of a catalog GPU key (srift.catalog.GpuSpec fields)."""
    g = catalog.gpu(key)  # type: ignore[attr-defined]
    half = getattr(g, "fp16_tflops", None) or getattr(g, "bf16_tflops", None)
    return GpuPeaks(key, float(g.fp32_tflops), getattr(g, "tf32_tflops", None) or None,
                    float(half) if half else None, float(g.memory_bandwidth_gbytes_s), float(g.memory_gib),
                    int(getattr(g, "launch_year", None) or 0))
