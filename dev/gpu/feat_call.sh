# dev/gpu/feat_call.sh - one device call checking the model features and FP8 K/V: the decode
# family's sweep and speed report, every family's feature sweep, the Python GPU tests of the
# features, a short 16-bit decode regression and the Python host cost. Steps have their own
# timeouts so that a slow compile cuts one step, not the call.
set -x
nvidia-smi -L
mkdir -p /tmp/fc
export FAJIT_TEST_CACHE_DIR=/tmp/fc FAJIT_CACHE_DIR=/tmp/fc FAJIT_VALIDATE=off
FAJIT_TEST_FEATURE_VERBOSE=1 FAJIT_TEST_FEATURE_CASES=${DEC_CASES:-30} CK_RUN_CASE=feature_sweep \
  timeout 90 build/tests/test_gpu_decode_features 2>&1 | tail -40
CK_RUN_CASE=fp8_unserved timeout 15 build/tests/test_gpu_decode_features 2>&1 | tail -3
CK_RUN_CASE=feature_decode_speed timeout 60 build/tests/test_gpu_decode_features 2>&1 | tail -12
FAJIT_TEST_FEATURES_VERBOSE=1 FAJIT_TEST_FEATURES_CASES=${FEAT_CASES:-25} timeout 100 \
  build/tests/test_gpu_features 2>&1 | tail -40
FAJIT_LIB=$PWD/build/libfajit.so PYTHONPATH=python timeout 60 python3 -m pytest -q -x \
  python/tests/test_gpu.py -k "softcap or sink or alibi or fp8 or feature" 2>&1 | tail -15
FAJIT_TEST_DECODE_CASES=15 CK_RUN_CASE=paged_sweep timeout 30 build/tests/test_gpu_decode 2>&1 | tail -3
FAJIT_LIB=$PWD/build/libfajit.so PYTHONPATH=python timeout 40 python3 bench/host_overhead.py \
  --calls 2000 --sync 128 2>&1 | tail -14
# FP8 paged decode against bf16 and FlashInfer (when carry/fi is carried)
[ -d carry/fi ] && source dev/decode/fi_setup.sh
FAJIT_MODEL_FEATURES=on FAJIT_LIB=$PWD/build/libfajit.so PYTHONPATH=python${PYTHONPATH:+:$PYTHONPATH} \
  timeout ${FP8_S:-120} python3 bench/fp8_decode.py ${FP8_ARGS:-} --out $OUT/fp8_decode.md 2>&1 | tail -30
