#!/usr/bin/env bash
# Re-record on an H200 with the kernel-clock method (bench.KernelClock): every kernel checked on random
# inputs with a poisoned output first, its baseline timed right before it in the same run, the kernel's
# own SM clock recorded for kernel and baseline (NVML beside it as nvml_sm_clock_mhz).
#   stage 1: the clock methods side by side, Level 13 (squares, projections, decode shapes)
#   stage 2: the showcase of Levels 8-11 at 4096³ and 8192³ (record --showcase-only), one file per input type
#   stage 3: after the kernel-hazard fixes (zeroed accumulators in Level 11 and 13, __syncwarp in Level 10's
#            TMA path): the GPU tests of those kernels (odd shapes, poisoned C, split-K twice on the same
#            counters), their compile reports, and a 4096³ timing of each to compare with the recorded run
# Usage: gemm_course/results/record_h200_clocks.sh 1|2|3 OUTDIR
set -uo pipefail
stage=${1:?stage 1 or 2}; out=${2:?output folder}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
py=${PYTHON:-python3}
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,power.limit,temperature.gpu --format=csv
if [ "$stage" = 1 ]; then
  $py - <<'PY'
import inspect, torch, torch.nn.functional as F
print("torch", torch.__version__)
print("scaled_mm", inspect.signature(F.scaled_mm) if hasattr(F, "scaled_mm") else None)
print("ScalingType", list(getattr(F, "ScalingType", [])))
PY
  timeout 200 $py -c "from gemm_course.clocks import record_clock_methods; record_clock_methods('$out/h200_clock_methods.json')" 2>&1 | tail -25
  timeout 300 $py -m gemm_course fp8 --record --out "$out/h200_13_fp8_clocks.json" 2>&1 | tail -90
  timeout 150 $py -m gemm_course fp8 --record --small-m --out "$out/h200_13_fp8_small_m_clocks.json" 2>&1 | tail -40
elif [ "$stage" = 3 ]; then
  timeout 330 $py -m pytest -q -o addopts="" -p no:cacheprovider tests/test_fp8_gemm.py tests/test_clocks.py \
      "tests/test_gpu.py::test_mma_pipeline_fed_by_tma_on_odd_shapes" "tests/test_gpu.py::test_hopper_level_correct_on_odd_shapes" \
      "tests/test_gpu.py::test_hopper_level_preconditions_and_many_tiles" "tests/test_gpu.py::test_tensor_core_showcase_settings_on_odd_shapes" \
      "tests/test_gpu.py::test_mma_pipeline_level_correct_and_preconditions_enforced" 2>&1 | tail -15
  timeout 60 $py -m pytest -q -o addopts="" -p no:cacheprovider tests/test_prose_level13.py -k compile 2>&1 | tail -3
  timeout 80 $py -m gemm_course fp8 --record --sizes 4096 --out "$out/verify_fp8_4096.json" 2>&1 | tail -12
  timeout 60 $py -m gemm_course record --levels 10_mma_pipeline 11_hopper_wgmma --showcase-only --sizes 4096 \
      --dtype bfloat16 --out "$out/verify_10_11_4096.json" 2>&1 | tail -22
else
  timeout 170 $py -m gemm_course record --levels 08_warp_tiling --showcase-only --sizes 4096,8192 \
      --out "$out/h200_top_rungs_float32_clocks.json" 2>&1 | tail -20
  for dt in bfloat16 float16; do
    timeout 200 $py -m gemm_course record --levels 09_wmma 10_mma_pipeline 11_hopper_wgmma --showcase-only \
        --sizes 4096,8192 --dtype $dt --out "$out/h200_top_rungs_${dt}_clocks.json" 2>&1 | tail -40
  done
fi
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv
