#!/usr/bin/env bash
# Re-record on an H200 with the kernel-clock method (bench.KernelClock): every kernel checked on random
# inputs with a poisoned output first, its baseline timed right before it in the same run, the kernel's
# own SM clock recorded for kernel and baseline (NVML beside it as nvml_sm_clock_mhz).
#   stage 1: the clock methods side by side, Level 13 (squares, projections, decode shapes)
#   stage 2: the showcase of Levels 8-11 at 4096³ and 8192³ (record --showcase-only), one file per input type
#            (for Levels 9-11 superseded by stage 10, which writes the shipped files themselves)
#   stage 3: after the kernel-hazard fixes (zeroed accumulators in Level 11 and 13, __syncwarp in Level 10's
#            TMA path): the GPU tests of those kernels (odd shapes, poisoned C, split-K twice on the same
#            counters), their compile reports, and a 4096³ timing of each to compare with the recorded run
#   stage 4: after Level 8's fix (no pointer formed outside A or B): its GPU tests, every showcase and experiment
#            setting checked on odd shapes (random inputs, NaN-poisoned C), compute-sanitizer memcheck on odd
#            shapes, then its showcase re-recorded at 4096³ and 8192³ with cuBLAS paired (clocks/ file)
#   stage 5: Nsight Compute: Level 8's counters after the fix, Level 13's promotion counters (with block-scaled
#            cuBLASLt), Level 8's shared-load passes (probe and kernel variants, per-instruction source counters);
#            and Level 10's barrier at one and two blocks per SM timed with the kernel clock
#   stage 6: repeated calls that reuse their preparation, checked on new operands, and calls repeated on their own
#            arrays (the packed launch) checked on new values written into them, with Level 13's GPU tests; then what a
#            repeated gc.gemm call costs on the host beside its kernel, each level's fastest recorded setting and
#            Level 13 at 4096³: host µs per call, back-to-back calls timed with CUDA events, the harness's
#            prepared launch in the same run (python -m gemm_course hostcost)
#   stage 7: Level 8's showcase, the source before its fix against the current one, in turn in one process; the
#            earlier source is read from git (the commit in the stage) or, without the history, from EARLIER=FILE
#   stage 8: after Level 8's fix, its per-level file with the kernel clock (showcase at every recorded size and
#            shape, the sweep, the instruction mixes; the README's command), then its top_rungs showcase at 4096³
#            and 8192³ (the shipped h200_top_rungs_float32.json)
#   stage 9: after Level 8's last edit, its counters at 4096³ (every showcase and experiment setting, cuBLAS fp32
#            in the same run; the README's counters command), the shipped h200_counters_08_warp_tiling.json
#   stage 10: after the kernel-hazard fixes, the files the chapters of Levels 9-11 quote, with the kernel clock: the
#            top_rungs showcase at 4096³ and 8192³ in bf16 and fp16, Level 11's experiments, the per-level files (every
#            recorded size, the sweep, the instruction mixes) and the bf16 and TMA bench files (the README's commands)
#   stage 11: Nsight Compute counters of Levels 9-11 at 4096³ after the hazard fixes (every showcase and experiment
#            setting, cuBLAS in the same run; the README's counters command)
#   stage 12: the autotuner's search spaces of Levels 10 and 11: every setting checked on odd shapes (random inputs,
#            NaN-poisoned C), then swept at 4096³ and, for Level 11, the decode shapes (record --sweep-only; the
#            shipped h200_tuning_10_11.json)
#   stage 13: Level 13's search space swept at 4096³ and the decode shapes with cuBLASLt paired (fp8 --record
#            --sweep-only; the shipped h200_tuning_13.json), then the live tuner on a few settings of Levels 11 and 13
#   stage 14: after Level 11's step 7 (stream-K): its GPU tests (odd shapes, shapes where it splits pairs between
#            clusters, the same bits on a second stream), Level 13's (its counter helper moved to tma.cuh) and the
#            repeated-call tests, and compute-sanitizer memcheck where step 7 splits
#   stage 15: then Level 11's steps 6 and 7 side by side at squares and the decode shapes, both C types, cuBLAS
#            paired (bench; the shipped h200_11_stream_k.json), and step 7's counters at 4096³ (counters --record
#            --missing-only; the shipped h200_counters_11_stream_k.json)
#   stage 16: Level 11's search space, step 7 in it, swept again at 4096³ and the decode shapes (record --sweep-only;
#            the shipped h200_tuning_11.json, which supersedes the Level 11 rows of h200_tuning_10_11.json)
#   stage 17: after Level 13's staged scales (the producer copies each k-block's scales into its stage): Level 13's
#            GPU tests (odd shapes, every ring depth, split-K, both with and without staged scales) and
#            compute-sanitizer memcheck of the staged kernels on odd shapes
#   stage 18: then the blockwise kernels with and without staged scales at the squares and the decode shapes,
#            cuBLASLt paired (fp8 --record --staged; the shipped h200_13_staged_scales.json), and their counters
#            at 4096³ and 64×7168×16384 beside block-scaled cuBLASLt (fp8 --counters --staged; the shipped
#            clocks/h200_13_staged_counters.json), and the same kernels at 2 to 4 splits where the split-K model does
#            not split (the N = 24576 decode shapes; h200_13_staged_splits.json); then stage 13 again, for the search
#            space with staged scales
# Usage: gemm_course/results/record_h200_clocks.sh 1|2|...|18 OUTDIR
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
  timeout 200 $py -c "from gemm_course.measure.clocks import record_clock_methods; record_clock_methods('$out/h200_clock_methods.json')" 2>&1 | tail -25
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
elif [ "$stage" = 4 ]; then
  timeout 150 $py -m pytest -q -o addopts="" -p no:cacheprovider tests/test_gpu.py -k "08_warp_tiling" 2>&1 | tail -6
  timeout 90 $py - <<'PY' 2>&1 | tail -6
import gemm_course as gc
from gemm_course.run.check import ODD_SHAPES
lv = gc.get_level("08_warp_tiling")
shapes = ODD_SHAPES + ((130, 132, 68), (1000, 1028, 516), (4097, 260, 1000), (64, 256, 16))  # vector path too
bad = [(p, s, str(r)) for p in (*lv.showcase, *lv.experiments) for s in shapes
       for r in [gc.check(lv.id, *s, **p)] if not r.passed]
print(f"Level 8: {len(lv.showcase) + len(lv.experiments)} settings x {len(shapes)} shapes checked, {len(bad)} failed", bad[:3])
PY
  cat > /tmp/memcheck_l8.py <<'PY'
import cupy, gemm_course as gc
cupy.cuda.set_allocator(None)  # one cudaMalloc per array, so that memcheck sees each array's own bounds
lv = gc.get_level("08_warp_tiling")
for p in lv.showcase:
    for s in ((33, 65, 17), (129, 260, 68), (257, 260, 36)):
        assert gc.check(lv.id, *s, **p).passed, (p, s)
print("memcheck program done")
PY
  sanitizer=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
  PYTHONPATH=$PWD timeout 150 "$sanitizer" --tool memcheck --error-exitcode 9 --print-limit 5 $py /tmp/memcheck_l8.py 2>&1 | tail -6
  echo "memcheck exit: ${PIPESTATUS[0]}"
  timeout 170 $py -m gemm_course record --levels 08_warp_tiling --showcase-only --sizes 4096,8192 \
      --out "$out/h200_top_rungs_float32_clocks.json" 2>&1 | tail -16
elif [ "$stage" = 5 ]; then
  timeout 150 $py -m gemm_course counters --record --levels 08_warp_tiling --out "$out/h200_08_counters_after_fix.json" 2>&1 | tail -4
  timeout 150 $py -c "from gemm_course.measure import ncu_probes as p; p.record_promotion_counters('$out/h200_13_promotion_counters.json')" 2>&1 | tail -8
  timeout 120 $py -c "from gemm_course.measure import ncu_probes as p; p.record_bank_probe('$out/h200_08_bank_probe.json')" 2>&1 | tail -24
  ncu=$($py -c "from gemm_course.measure.counters import find_ncu; print(find_ncu())")
  cat > /tmp/l8_source.json <<'JS'
[{"kind": "level8", "params": {"BM": 64, "BN": 256, "WM": 64, "WN": 64, "stepped": true}, "variant": "as_is", "M": 4096, "N": 4096, "K": 4096}]
JS
  timeout 90 "$ncu" --target-processes all --clock-control none --nvtx --nvtx-include gemm_course/ --section SourceCounters \
      --import-source no -f -o "$out/h200_08_source" $py -m gemm_course.measure.ncu_probes /tmp/l8_source.json 2>&1 | tail -3
  timeout 60 "$ncu" -i "$out/h200_08_source.ncu-rep" --page source --print-source sass --csv > "$out/h200_08_source_sass.csv" 2>&1
  echo "source page: $(wc -l < "$out/h200_08_source_sass.csv") lines"; head -c 600 "$out/h200_08_source_sass.csv"; echo
  timeout 150 $py -c "from gemm_course.measure import ncu_probes as p; p.record_barrier_blocks('$out/h200_10_barrier_blocks.json')" 2>&1 | tail -9
elif [ "$stage" = 6 ]; then
  timeout 240 $py -m pytest -q -o addopts="" -p no:cacheprovider tests/test_prepared_launch.py tests/test_fp8_gemm.py \
      "tests/test_gpu.py::test_mma_pipeline_fed_by_tma_on_odd_shapes" "tests/test_gpu.py::test_hopper_level_correct_on_odd_shapes" 2>&1 | tail -6
  timeout 380 $py -m gemm_course hostcost --out "$out/h200_host_cost.json" 2>&1 | tail -20
elif [ "$stage" = 7 ]; then
  commit=5facd7f37eedbdb19602e6f5302c5ecfe7a7a90b
  earlier=${EARLIER:-/tmp/08_warp_tiling_earlier.cu}
  [ -n "${EARLIER:-}" ] || git show "$commit:gemm_course/kernels/08_warp_tiling.cu" > "$earlier" || exit 1
  timeout 300 $py -c "from gemm_course.measure import ncu_probes as p; p.record_level8_edit_ab('$out/h200_08_edit_ab.json', '$earlier', '$commit')" 2>&1 | tail -50
elif [ "$stage" = 8 ]; then
  SECONDS=0
  timeout 300 $py -m gemm_course record --levels 08_warp_tiling --out "$out/h200_08_warp_tiling.json" 2>&1 | tail -40
  echo "per-level record: exit ${PIPESTATUS[0]}, ${SECONDS} s"
  timeout 90 $py -m gemm_course record --levels 08_warp_tiling --showcase-only --sizes 4096,8192 \
      --out "$out/h200_top_rungs_float32.json" 2>&1 | tail -14
  echo "top_rungs: exit ${PIPESTATUS[0]}, ${SECONDS} s in all"
elif [ "$stage" = 9 ]; then
  SECONDS=0
  sha256sum gemm_course/kernels/08_warp_tiling.cu
  timeout 250 $py -m gemm_course counters --record --levels 08_warp_tiling \
      --out "$out/h200_counters_08_warp_tiling.json" 2>&1 | tail -8
  echo "counters: exit ${PIPESTATUS[0]}, ${SECONDS} s"
elif [ "$stage" = 10 ]; then
  SECONDS=0
  sha256sum gemm_course/kernels/09_*.cu gemm_course/kernels/10_*.cu gemm_course/kernels/11_*.cu
  for dt in bfloat16 float16; do
    timeout 150 $py -m gemm_course record --levels 09_wmma 10_mma_pipeline 11_hopper_wgmma --showcase-only \
        --sizes 4096,8192 --dtype $dt --out "$out/h200_top_rungs_${dt}.json" 2>&1 | tail -32
    echo "top_rungs $dt: exit ${PIPESTATUS[0]}, ${SECONDS} s"
  done
  timeout 90 $py -m gemm_course experiments --levels 11_hopper_wgmma --out "$out/h200_experiments_11.json" 2>&1 | tail -12
  echo "experiments 11: exit ${PIPESTATUS[0]}, ${SECONDS} s"
  for lv in 11_hopper_wgmma 10_mma_pipeline 09_wmma; do
    timeout 150 $py -m gemm_course record --levels $lv --out "$out/h200_$lv.json" 2>&1 | tail -6
    echo "record $lv: exit ${PIPESTATUS[0]}, ${SECONDS} s"
  done
  timeout 60 $py -m gemm_course bench --config 09_wmma --config 10_mma_pipeline:stages=4 --config 10_mma_pipeline:stages=4,BN=256 \
      --dtype bfloat16 --sizes 4096,8192 --out "$out/h200_09_10_bfloat16.json" 2>&1 | tail -4
  timeout 60 $py -m gemm_course bench --config 10_mma_pipeline:stages=3,BN=256,copy=tma --sizes 256,512,1024,2048,4096,8192 \
      --out "$out/h200_10_tma_float16.json" 2>&1 | tail -4
  timeout 60 $py -m gemm_course bench --config 10_mma_pipeline:stages=2,BN=256,copy=tma --config 10_mma_pipeline:stages=3,BN=256,copy=tma \
      --config 10_mma_pipeline:stages=4,BN=256,copy=tma --dtype bfloat16 --sizes 1024,2048,4096,8192 \
      --out "$out/h200_10_tma_bfloat16.json" 2>&1 | tail -4
  echo "benches: ${SECONDS} s"
elif [ "$stage" = 11 ]; then
  SECONDS=0
  timeout 400 $py -m gemm_course counters --record --levels 11_hopper_wgmma 10_mma_pipeline 09_wmma \
      --out "$out/h200_counters_09_11.json" 2>&1 | tail -12
  echo "counters 9-11: exit ${PIPESTATUS[0]}, ${SECONDS} s"
elif [ "$stage" = 12 ]; then
  SECONDS=0
  timeout 200 $py - <<'PY' 2>&1 | tail -6
import gemm_course as gc
from gemm_course.measure.autotune import search_space
shapes = ((129, 264, 72), (64, 2112, 200), (1000, 1032, 520))
for level in ("10_mma_pipeline", "11_hopper_wgmma"):
    space = search_space(level)
    bad = [(p, s, str(r)) for p in space for s in shapes for r in [gc.check(level, *s, **p)] if not r.passed]
    print(f"{level}: {len(space)} settings x {len(shapes)} shapes checked, {len(bad)} failed", bad[:3], flush=True)
PY
  echo "odd shapes: ${SECONDS} s"
  timeout 330 $py -m gemm_course record --levels 10_mma_pipeline 11_hopper_wgmma --sweep-only \
      --out "$out/h200_tuning_10_11.json" 2>&1 | tail -8
  echo "sweep 10-11: exit ${PIPESTATUS[0]}, ${SECONDS} s"
elif [ "$stage" = 13 ]; then
  SECONDS=0
  timeout 420 $py -m gemm_course fp8 --record --sweep-only --out "$out/h200_tuning_13.json" 2>&1 | tail -12
  echo "sweep 13: exit ${PIPESTATUS[0]}, ${SECONDS} s"
  timeout 90 $py - <<'PY' 2>&1 | tail -8
from gemm_course.measure import autotune
for level in ("11_hopper_wgmma", "13_fp8_blockscaled"):
    tuned = autotune.autotune(level, [(64, 2112, 7168)], configs=autotune.search_space(level)[:3], progress=lambda _: None)
    print(level, {k: (round(v["tflops"], 1), v["params"]) for k, v in tuned["best"].items()}, len(tuned["table"]), "timed")
PY
  echo "live tuner: ${SECONDS} s"
elif [ "$stage" = 14 ]; then
  SECONDS=0
  timeout 330 $py -m pytest -q -o addopts="" -p no:cacheprovider tests/test_gpu.py tests/test_fp8_gemm.py \
      tests/test_prepared_launch.py -k "stream_k or hopper_level_correct_on_odd_shapes or hopper_level_preconditions \
      or fp8 or on_the_gpu" 2>&1 | tail -4
  echo "GPU tests: ${SECONDS} s"
  cat > /tmp/memcheck_l11.py <<'PY'
import cupy, gemm_course as gc
cupy.cuda.set_allocator(None)  # one cudaMalloc per array, so that memcheck sees each array's own bounds
for shape in ((257, 520, 1000), (300, 1032, 2048), (64, 2112, 1000)):
    for c_type in ("float32", "input"):
        r = gc.check("11_hopper_wgmma", *shape, step=7, c_type=c_type)
        print(shape, c_type, r.passed, flush=True)
PY
  timeout 150 compute-sanitizer --tool memcheck --error-exitcode 3 $py /tmp/memcheck_l11.py 2>&1 | tail -4
  echo "memcheck: exit ${PIPESTATUS[0]}, ${SECONDS} s"
elif [ "$stage" = 15 ]; then
  SECONDS=0
  timeout 240 $py -m gemm_course bench --config 11:step=6,c_type=input --config 11:step=7,c_type=input \
      --config 11:step=6 --config 11:step=7 --dtype bfloat16 \
      --sizes 1024,2048,4096,8192,64x2112x7168,128x2112x7168,64x24576x1536,128x24576x1536,64x7168x16384,128x7168x16384 \
      --out "$out/h200_11_stream_k.json" 2>&1 | tail -42
  echo "stream-K bench: exit ${PIPESTATUS[0]}, ${SECONDS} s"
  timeout 150 $py -m gemm_course counters --record --levels 11_hopper_wgmma --missing-only \
      --out "$out/h200_counters_11_stream_k.json" 2>&1 | tail -6
  echo "counters: exit ${PIPESTATUS[0]}, ${SECONDS} s"
elif [ "$stage" = 16 ]; then
  SECONDS=0
  timeout 300 $py -m gemm_course record --levels 11_hopper_wgmma --sweep-only --out "$out/h200_tuning_11.json" 2>&1 | tail -4
  echo "sweep 11: exit ${PIPESTATUS[0]}, ${SECONDS} s"
elif [ "$stage" = 17 ]; then
  SECONDS=0
  timeout 330 $py -m pytest -q -x -o addopts="" -p no:cacheprovider tests/test_fp8_gemm.py 2>&1 | tail -4
  echo "GPU tests: exit ${PIPESTATUS[0]}, ${SECONDS} s"
  cat > /tmp/memcheck_l13.py <<'PY'
import cupy
from gemm_course.fp8 import gemm as fg
cupy.cuda.set_allocator(None)  # one cudaMalloc per array, so that memcheck sees each array's own bounds
for (M, N, K), options in (((129, 264, 1152), {}), ((7, 136, 256), {"splits": 2}), ((65, 300, 2064), {"block_m": 64}),
                           ((300, 7, 1040), {"block_m": 64, "splits": 3}), ((1, 8, 16), {"overlap": False})):
    a, sa, b, sb = fg.random_fp8_operands(M, N, K, "blockwise", seed=M)
    C = fg.fp8_gemm(cupy.asarray(a), cupy.asarray(sa), cupy.asarray(b), cupy.asarray(sb), staged_scales=True, **options)
    cupy.cuda.Device().synchronize()
    print((M, N, K), options, "ran", flush=True)
PY
  timeout 120 compute-sanitizer --tool memcheck --error-exitcode 3 $py /tmp/memcheck_l13.py 2>&1 | tail -4
  echo "memcheck: exit ${PIPESTATUS[0]}, ${SECONDS} s"
elif [ "$stage" = 18 ]; then
  SECONDS=0
  timeout 260 $py -m gemm_course fp8 --record --staged --out "$out/h200_13_staged_scales.json" 2>&1 | tail -40
  echo "staged scales: exit ${PIPESTATUS[0]}, ${SECONDS} s"
  timeout 150 $py -m gemm_course fp8 --counters --staged --out "$out/h200_13_staged_counters.json" 2>&1 | tail -8
  echo "counters: exit ${PIPESTATUS[0]}, ${SECONDS} s"
  timeout 150 $py -m gemm_course fp8 --record --staged --splits 1,2,3,4 --sizes 64x24576x1536,128x24576x1536 \
      --out "$out/h200_13_staged_splits.json" 2>&1 | tail -40
  echo "split counts: exit ${PIPESTATUS[0]}, ${SECONDS} s"
else
  timeout 170 $py -m gemm_course record --levels 08_warp_tiling --showcase-only --sizes 4096,8192 \
      --out "$out/h200_top_rungs_float32_clocks.json" 2>&1 | tail -20
  for dt in bfloat16 float16; do
    timeout 200 $py -m gemm_course record --levels 09_wmma 10_mma_pipeline 11_hopper_wgmma --showcase-only \
        --sizes 4096,8192 --dtype $dt --out "$out/h200_top_rungs_${dt}_clocks.json" 2>&1 | tail -40
  done
fi
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv
