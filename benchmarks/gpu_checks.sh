#!/usr/bin/env bash
# The GPU checks in one run, for a machine with a CUDA GPU whose Python already holds torch,
# transformers, CuPy, pandas and pytest (no install: the library is put on PYTHONPATH with its
# kernels where the installed package has them, tokenbook/kernels).
#   bash benchmarks/gpu_checks.sh [OUT_DIR]          (GPU_BENCHMARK=0: the tests alone)
# Writes OUT_DIR/gpu_tests.log (every test marked gpu and the kernel-compile tests, verbose: the
# CuPy kernels, the scoring engine's PaliGemma and Marian paths, the grounded caption table, Marian
# training and the cancellation chapter's analyses and paper-scale path on CUDA),
# OUT_DIR/scoring_gpu.log and benchmarks/results/scoring_gpu.json (copied to OUT_DIR).
set -uo pipefail
out=${1:-/tmp/tokenbook-gpu}
mkdir -p "$out"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONUNBUFFERED=1 MPLBACKEND=Agg
site=$(mktemp -d)
cp -r lib/tokenbook "$site/" && cp -r kernels "$site/tokenbook/kernels" || exit 1
export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
py=${PYTHON:-python3}
nvidia-smi -L 2>&1 | tee "$out/gpu_tests.log"
$py -c "import torch, cupy; print('torch', torch.__version__, 'cuda', torch.version.cuda, '| cupy', cupy.__version__)" 2>&1 | tee -a "$out/gpu_tests.log"
gpu_tests=(tests/scoring/test_kernels_gpu.py tests/scoring/test_kernels_compile.py
           tests/scoring/test_scoring_gpu_models.py tests/grounded/test_grounded_tables_gpu.py
           tests/models/test_models_marian_gpu.py tests/cancellation_hypothesis/test_rl_gpu.py)
$py -m pytest -p no:cacheprovider -o addopts="" -rs -v --durations=10 --timeout=300 \
    "${gpu_tests[@]}" 2>&1 | tee -a "$out/gpu_tests.log"
tests_rc=${PIPESTATUS[0]}
bench_rc=0
if [ "${GPU_BENCHMARK:-1}" != 0 ]; then
    $py benchmarks/scoring.py --device cuda --repeats 5 2>&1 | tee "$out/scoring_gpu.log"
    bench_rc=${PIPESTATUS[0]}
    cp benchmarks/results/scoring_gpu.json "$out/" 2>/dev/null
fi
echo "gpu tests exit $tests_rc, benchmark exit $bench_rc"
exit $(( tests_rc || bench_rc ))
