#!/usr/bin/env bash
# Level 14 on a GPU, in one call: the recorded run, then the page's live cells.
#   1. python -m gemm_course dsl --record: every Triton and Gluon kernel checked on odd shapes (random inputs, NaN
#      guards around A, B and C, a NaN-poisoned C), then timed beside cuBLAS and Levels 8, 10 and 11 in the same
#      process (the file the chapter quotes: gemm_course/results/<gpu>_14_dsl.json once copied back)
#   1b. python -m gemm_course dsl --counters: hardware counters (ncu) of one setting of each DSL kernel beside Levels
#      10 and 11 and cuBLAS at 8192³ in bf16 (gemm_course/results/<gpu>_14_dsl_counters.json)
#   2. the lesson's live run as the notebook calls it (gemm_course.dsl.lesson.run), its output printed in full: a
#      live run that falls back to the recorded one says so here
#   3. the Level 14 tests, then the notebook under nbval with the GPU present
# Usage: gemm_course/results/record_level14.sh OUTDIR [SIZES]   (SIZES: e.g. 8192 for a shorter run; default: the
#        record's four shapes). Triton builds its launcher with a C compiler: the system gcc is used.
set -uo pipefail
out=${1:?output folder}; sizes=${2:-}
mkdir -p "$out"
export PYTHONUNBUFFERED=1 CC=/usr/bin/gcc CXX=/usr/bin/g++
py=${PYTHON:-python3}
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,power.limit,temperature.gpu --format=csv
$py -c "import triton, cupy, numpy; print('triton', triton.__version__, 'cupy', cupy.__version__, 'numpy', numpy.__version__)"
gpu=$($py -c "import cupy; n = cupy.cuda.runtime.getDeviceProperties(0)['name'].decode(); print('h200' if 'H200' in n else 'h100' if 'H100' in n else 'gpu')")
SECONDS=0
timeout 330 $py -m gemm_course dsl --record ${sizes:+--sizes "$sizes"} --out "$out/${gpu}_14_dsl.json" 2>&1 | tail -60
echo "record: exit ${PIPESTATUS[0]}, ${SECONDS} s"
timeout 420 $py -m gemm_course dsl --counters --out "$out/${gpu}_14_dsl_counters.json" 2>&1 | tail -20
echo "counters: exit ${PIPESTATUS[0]}, ${SECONDS} s"
timeout 90 $py -c "from gemm_course.dsl import lesson; lesson.run()" 2>&1 | tail -30
echo "lesson.run: exit ${PIPESTATUS[0]}, ${SECONDS} s"
timeout 120 $py -m pytest -q -o addopts="" -p no:cacheprovider tests/test_dsl.py tests/test_dsl_lesson.py 2>&1 | tail -8
echo "tests: ${SECONDS} s"
timeout 150 $py -m pytest -q -o addopts="" -p no:cacheprovider --nbval-lax --nbval-current-env \
    notebooks/14_triton_gluon.ipynb 2>&1 | tail -12
echo "notebook: exit ${PIPESTATUS[0]}, ${SECONDS} s"
