#!/usr/bin/env bash
# Builds bench/cutlass_conv/build/libconv3d_sm90.so for bench/conv_cutlass.py: the kernels of conv3d_sm90.cu for
# sm_90a, the CUDA runtime linked statically (the library needs only the driver where it runs). No GPU is needed
# to build. NVCC: a CUDA 12.3+ nvcc (the pip wheels nvidia-cuda-nvcc, -crt, -cccl, -runtime and nvidia-nvvm of
# one release make one, with CUDA_LIB their lib folder); CUTLASS: a CUTLASS 4 checkout (include/ and
# tools/util/include are used). Takes about a minute per config on one core.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
: "${NVCC:?set NVCC to an nvcc}" "${CUTLASS:?set CUTLASS to a CUTLASS checkout}"
out="${1:-$here/build/libconv3d_sm90.so}"
mkdir -p "$(dirname "$out")"
"$NVCC" -std=c++17 -O3 -DNDEBUG -arch=sm_90a --expt-relaxed-constexpr -shared -Xcompiler -fPIC -cudart static \
  -I"$CUTLASS/include" -I"$CUTLASS/tools/util/include" ${CUDA_LIB:+-L"$CUDA_LIB"} \
  -o "$out" "$here/conv3d_sm90.cu"
echo "built $out"
