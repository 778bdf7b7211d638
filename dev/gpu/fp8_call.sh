set -x
nvidia-smi -L
mkdir -p /tmp/fc
export FAJIT_TEST_CACHE_DIR=/tmp/fc
FAJIT_TEST_FEATURE_CASES=80 CK_RUN_CASE=feature_sweep timeout 300 build/tests/test_gpu_decode_features 2>&1 | tail -25
CK_RUN_CASE=fp8_unserved timeout 60 build/tests/test_gpu_decode_features 2>&1 | tail -5
CK_RUN_CASE=feature_decode_speed timeout 150 build/tests/test_gpu_decode_features 2>&1 | tail -10
FAJIT_TEST_DECODE_CASES=25 CK_RUN_CASE=paged_sweep timeout 120 build/tests/test_gpu_decode 2>&1 | tail -5
