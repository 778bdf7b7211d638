# dev/gpu/quick_feat_call.sh - the shortest useful device check of the decode family's
# features: a few sweep cases against float64 and the FP8 / features speed report on the
# cheapest shapes (for a call with little device time left).
set -x
nvidia-smi -L
mkdir -p /tmp/fc
export FAJIT_TEST_CACHE_DIR=/tmp/fc FAJIT_VALIDATE=off
FAJIT_TEST_FEATURE_VERBOSE=1 FAJIT_TEST_FEATURE_CASES=${CASES:-6} CK_RUN_CASE=feature_sweep \
  timeout ${SWEEP_S:-25} build/tests/test_gpu_decode_features 2>&1 | tail -12
FAJIT_TEST_SPEED_SHAPES=${SHAPES:-2} CK_RUN_CASE=feature_decode_speed \
  timeout ${SPEED_S:-28} build/tests/test_gpu_decode_features 2>&1 | tail -8
