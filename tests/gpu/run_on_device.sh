#!/usr/bin/env bash
# The GPU suite on a CUDA machine, from any folder (docs/gpu-tests.md): installs the wheels and unpacks the
# .tar.xz package trees carried in .whl/ (if any) into /tmp/site, prints the software and the GPUs, runs
# tests/gpu, and when $OUT is set writes the JUnit XML and the log there. Extra arguments go to pytest, e.g. -m "gpu and not slow" or -k nvdec.
# --streams: the suite as four pytest processes side by side (the whole-build test, the perception preset, the other
# presets one after the other, the rest with -n 3), each logged to $OUT (default /tmp/gpu-suite): about 7 minutes on
# one H200 instead of about 15 in one process.
set -uo pipefail
cd "$(dirname "$0")/../.."
PYTHON=${PYTHON:-python3}
if compgen -G ".whl/*.whl" > /dev/null; then
  "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
    .whl/*.whl || exit 1
fi
for pack in .whl/*.tar.xz; do  # installed package trees, packed smaller than their wheels for a capped upload
  [ -e "$pack" ] || continue
  mkdir -p /tmp/site && tar -xJf "$pack" -C /tmp/site || exit 1
done
[ -d /tmp/site ] && export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
export PYTHONUNBUFFERED=1
"$PYTHON" - <<'PY'
import importlib

import torch

print(f"torch {torch.__version__}, CUDA {torch.version.cuda}, cuDNN {torch.backends.cudnn.version()}, "
      f"{torch.cuda.device_count()} GPU(s) visible to torch")
for name in ("triton", "cudnn", "av", "diffusers", "ray"):
    try:
        print(f"{name} {importlib.import_module(name).__version__}")
    except Exception as error:  # the tests that need it skip and say so
        print(f"{name}: not importable ({type(error).__name__}: {error})")
PY
nvidia-smi -L
if [ "${1:-}" = "--streams" ]; then
  out=${OUT:-/tmp/gpu-suite}; mkdir -p "$out"
  run() { name=$1; shift; "$PYTHON" -m pytest -q -p no:cacheprovider -m gpu --tb=short -rfEs --durations=15 \
    --junitxml "$out/$name.xml" "$@" > "$out/$name.log" 2>&1; echo "rc=$?" >> "$out/$name.log"; }
  run build tests/gpu/test_gpu_build.py &
  run perception tests/gpu/test_preset_builds.py -k perception &
  (run presets-480p tests/gpu/test_preset_builds.py -k 480p; run presets-ti2v tests/gpu/test_preset_builds.py -k ti2v
   run presets-cosmos tests/gpu/test_preset_builds.py -k cosmos) &
  run rest -n 3 tests/gpu --ignore=tests/gpu/test_gpu_build.py --ignore=tests/gpu/test_preset_builds.py &
  wait
  failed=0
  for log in "$out"/*.log; do echo "=== $log"; tail -4 "$log"; grep -q "^rc=0$" "$log" || failed=1; done
  exit $failed
fi
junit=()
[ -n "${OUT:-}" ] && junit=(--junitxml "$OUT/gpu-tests.xml")
"$PYTHON" -m pytest -q -p no:cacheprovider -m gpu tests/gpu --durations=20 -rs ${junit[@]+"${junit[@]}"} "$@" 2>&1 \
  | tee ${OUT:+"$OUT/gpu-tests.log"}
exit "${PIPESTATUS[0]}"
