// The encoder's causal 3x3x3 conv as CUTLASS's Hopper implicit GEMM (TMA im2col loads, warp-specialised wgmma),
// with tiles whose N is the layer's output channel count (96 or 192): cuDNN's and Triton's kernels tile N by
// powers of two, so 96 output channels cost 128 lanes there. bf16 in and out, fp32 accumulation, NDHWC
// activations and KTRSC filters (PyTorch's channels-last 3-D), padding (0, 1, 1), stride 1, no bias.
//
// A C interface for ctypes (cutlass_conv.py; built by cutlass_build.py): no PyTorch headers, so one build
// serves any torch version.

#include <cuda_runtime.h>

// In the order CUTLASS's own conv tests include them (the collective builders need what the kernel brings in).
#include "cutlass/cutlass.h"
#include "cute/tensor.hpp"
#include "cute/atom/mma_atom.hpp"
#include "cutlass/numeric_types.h"
#include "cutlass/conv/device/conv_universal_adapter.hpp"
#include "cutlass/conv/kernel/conv_universal.hpp"
#include "cutlass/conv/collective/collective_builder.hpp"
#include "cutlass/epilogue/collective/collective_builder.hpp"

using namespace cute;

namespace {

using Element = cutlass::bfloat16_t;
using Layout = cutlass::layout::TensorNDHWC;
constexpr int kAlignment = 8;  // 16 bytes of bf16

// CUTLASS's conv kernels are not persistent (its cooperative and ping-pong schedules refuse convolutions):
// one warp-specialised producer of TMA loads, consumer warpgroups of wgmma, a TMA epilogue.
using Schedule = cutlass::conv::KernelImplicitTmaWarpSpecializedSm90;
using Epilogue = cutlass::epilogue::TmaWarpSpecialized;

template <int M, int N, int K, int ClusterM>
struct Config {
  using TileShape = Shape<Int<M>, Int<N>, Shape<Int<K>>>;
  using ClusterShape = Shape<Int<ClusterM>, _1, _1>;

  using CollectiveEpilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
      cutlass::epilogue::collective::EpilogueTileAuto, float, float,
      void, Layout, kAlignment,  // no source tensor: D = accumulator
      Element, Layout, kAlignment, Epilogue>::CollectiveOp;

  using CollectiveMainloop = typename cutlass::conv::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, cutlass::conv::Operator::kFprop,
      Element, Layout, kAlignment, Element, Layout, kAlignment, float, TileShape, ClusterShape,
      cutlass::conv::collective::StageCountAutoCarveout<
          static_cast<int>(sizeof(typename CollectiveEpilogue::SharedStorage))>,
      Schedule>::CollectiveOp;

  using ProblemShape = cutlass::conv::ConvProblemShape<CollectiveMainloop::DispatchPolicy::ConvOp,
                                                       CollectiveMainloop::DispatchPolicy::NumSpatialDimensions>;
  using Kernel = cutlass::conv::kernel::ConvUniversal<ProblemShape, CollectiveMainloop, CollectiveEpilogue>;
  using Conv = cutlass::conv::device::ConvUniversalAdapter<Kernel>;
};

// Problem: activations [n, d, h, w, c] (d counts the two causal frames), filter [k, 3, 3, 3, c].
template <class C>
typename C::Conv::Arguments arguments(const void* x, const void* weight, void* y, int n, int d, int h, int w, int c,
                                      int k) {
  using ProblemShape = typename C::ProblemShape;
  ProblemShape problem(cutlass::conv::Mode::kCrossCorrelation, {n, d, h, w, c},
                       {int64_t(d) * h * w * c, int64_t(h) * w * c, int64_t(w) * c, c, 1}, {k, 3, 3, 3, c},
                       {27 * int64_t(c), 9 * int64_t(c), 3 * int64_t(c), c, 1}, {0, 1, 1}, {0, 1, 1}, {1, 1, 1},
                       {1, 1, 1}, 1);
  using StrideD = typename C::Kernel::StrideD;
  StrideD stride_d{};
  cute::for_each(cute::make_seq<cute::rank<0>(StrideD{})>{}, [&](auto i) {
    cute::get<0, i>(stride_d) = problem.stride_C[ProblemShape::RankT - 2 - i];
  });
  cutlass::KernelHardwareInfo hw_info;
  cudaGetDevice(&hw_info.device_id);
  hw_info.sm_count = cutlass::KernelHardwareInfo::query_device_multiprocessor_count(hw_info.device_id);
  typename C::Conv::Arguments args{
      problem,
      {static_cast<const Element*>(x), static_cast<const Element*>(weight)},
      {{}, nullptr, stride_d, static_cast<Element*>(y), stride_d},
      hw_info};
  args.epilogue.thread.alpha = 1.0f;
  args.epilogue.thread.beta = 0.0f;
  return args;
}

template <class C>
int run(const void* x, const void* weight, void* y, int n, int d, int h, int w, int c, int k, void* workspace,
        size_t workspace_bytes, cudaStream_t stream, size_t* needed) {
  auto args = arguments<C>(x, weight, y, n, d, h, w, c, k);
  typename C::Conv conv;
  if (conv.can_implement(args) != cutlass::Status::kSuccess) return 1;
  size_t size = C::Conv::get_workspace_size(args);
  if (needed) {
    *needed = size;
    return 0;
  }
  if (size > workspace_bytes) return 2;
  if (conv.initialize(args, workspace, stream) != cutlass::Status::kSuccess) return 3;
  if (conv.run(stream) != cutlass::Status::kSuccess) return 4;
  return cudaGetLastError() == cudaSuccess ? 0 : 5;
}

using Runner = int (*)(const void*, const void*, void*, int, int, int, int, int, int, void*, size_t, cudaStream_t,
                       size_t*);

struct Entry {
  const char* name;
  Runner runner;
};

#define LF_CONFIG(M, N, K, CM) {"m" #M "_n" #N "_k" #K "_c" #CM, &run<Config<M, N, K, CM>>}

// The configs a plan pass times (cutlass_conv.CANDIDATES); with LF_EVERY_CONFIG also the ones measured to lose
// (bench/conv_cutlass.py builds those too, to re-measure them). Each config costs ~10 s of nvcc time.
const Entry kConfigs[] = {
    LF_CONFIG(128, 96, 32, 2),  LF_CONFIG(256, 96, 32, 1),  LF_CONFIG(256, 96, 32, 2),
    LF_CONFIG(128, 192, 64, 1), LF_CONFIG(128, 192, 64, 2), LF_CONFIG(128, 192, 64, 4),
#ifdef LF_EVERY_CONFIG
    LF_CONFIG(128, 96, 32, 1),  LF_CONFIG(128, 96, 64, 1),  LF_CONFIG(128, 96, 64, 2),
    LF_CONFIG(64, 96, 64, 1),   LF_CONFIG(64, 192, 64, 1),  LF_CONFIG(256, 96, 32, 4),
    LF_CONFIG(256, 96, 64, 2),
#endif
};  // 256 x 192 does not fit: ptxas serialises its wgmma for want of registers

}  // namespace

extern "C" {

int lf_conv3d_config_count() { return sizeof(kConfigs) / sizeof(kConfigs[0]); }

const char* lf_conv3d_config_name(int config) { return kConfigs[config].name; }

// 0 on success; 1: the config cannot run this problem; 2: workspace too small; 3-5: CUTLASS or CUDA errors.
int lf_conv3d_workspace(int config, int n, int d, int h, int w, int c, int k, size_t* bytes) {
  return kConfigs[config].runner(nullptr, nullptr, nullptr, n, d, h, w, c, k, nullptr, 0, nullptr, bytes);
}

int lf_conv3d_run(int config, const void* x, const void* weight, void* y, int n, int d, int h, int w, int c, int k,
                  void* workspace, size_t workspace_bytes, void* stream) {
  return kConfigs[config].runner(x, weight, y, n, d, h, w, c, k, workspace, workspace_bytes,
                                 static_cast<cudaStream_t>(stream), nullptr);
}
}
