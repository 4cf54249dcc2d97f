"""The fast encoder's convolutions, run either by PyTorch or by cuDNN's graph API with a plan picked by name.

`TorchConvs` calls F.conv2d/F.conv3d: cuDNN's heuristics pick the kernel (a function of the shapes, the GPU model
and the software). `PlannedConvs` builds one cuDNN graph per convolution signature (shapes, strides, stride,
padding, bias or not), and runs the plan the PlanBook records for it. A signature the book has not seen is tuned
once: the first candidate plans cuDNN's heuristics (modes B then A) rank, PyTorch's own call, and for the
encoder's causal 3x3x3 convs the Triton kernel's configs (triton_conv.py) and, on an sm_90 GPU where CUTLASS's
library can be built, CUTLASS's (cutlass_conv.py), each timed on the real operands; the fastest name goes into
the book. Only backend engine plans are cuDNN candidates (precompiled, no runtime
compilation, reproducible bits run to run), and none that reduce in reduced precision.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from . import triton_conv
from .cutlass import conv as cutlass_conv
from .plan_book import PlanBook

PYTORCH_PLAN = "pytorch"  # the plan name of "call F.conv and let cuDNN's heuristics choose"
CANDIDATE_PLANS = 8  # engine plans timed per signature, in the heuristics' ranking
TIMING_REPS = 3


def torch_conv(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, stride, padding) -> torch.Tensor:
    conv = F.conv3d if x.dim() == 5 else F.conv2d
    return conv(x, weight, bias, stride, padding)


class TorchConvs:
    """PyTorch's convolutions (cuDNN heuristics on CUDA, the CPU kernels elsewhere)."""

    def __call__(self, x, weight, bias, stride, padding) -> torch.Tensor:
        return torch_conv(x, weight, bias, stride, padding)


def signature(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, stride, padding) -> str:
    """Everything that selects a convolution's kernels; equal signatures can share a plan."""
    return (f"x{list(x.shape)}:{list(x.stride())} w{list(weight.shape)}:{list(weight.stride())} "
            f"s{list(_tuple(stride, x.dim() - 2))} p{list(_tuple(padding, x.dim() - 2))} "
            f"bias={bias is not None} {str(x.dtype).removeprefix('torch.')}")


def _tuple(value, dims: int) -> tuple[int, ...]:
    return tuple(value) if isinstance(value, (tuple, list)) else (value,) * dims


@dataclass
class _Plan:
    """One signature's chosen plan: a built cuDNN graph and the tensors it binds, or PyTorch's call."""

    name: str
    graph: Any = None
    index: int = 0
    operands: tuple = ()  # (image, weight, bias or None, output) graph tensors
    workspace: int = 0
    triton: triton_conv.ConvConfig | None = None  # a Triton plan's config
    cutlass: str | None = None  # a CUTLASS plan's config label


class PlannedConvs:
    """Convolutions by recorded cuDNN plans (CUDA, bf16 or fp16, any dense layout)."""

    def __init__(self, book: PlanBook):
        import cudnn  # nvidia-cudnn-frontend; checked by the tokenizer's preflight

        self.cudnn = cudnn
        self.book = book
        self._plans: dict[str, _Plan] = {}
        self._handles: dict[int, Any] = {}
        self._taps: dict[tuple, tuple[torch.Tensor, torch.Tensor]] = {}  # a weight's Triton layout, by its storage
        self.declined: dict[str, str] = {}  # signature -> why cuDNN offered no engine plan (PyTorch runs it)

    def __call__(self, x, weight, bias, stride, padding) -> torch.Tensor:
        key = signature(x, weight, bias, stride, padding)
        plan = self._plans.get(key)
        if plan is None:
            plan = self._plans[key] = self._plan(key, x, weight, bias, stride, padding)
        if plan.name == PYTORCH_PLAN:
            return torch_conv(x, weight, bias, stride, padding)
        if plan.triton is not None:
            return triton_conv.conv3d_causal(x, self._weight_taps(weight), plan.triton)
        if plan.cutlass is not None:
            return cutlass_conv.require_kernels(plan.name).conv(plan.cutlass, x, weight)
        out = self._output(x, weight, stride, padding)
        self._execute(plan, x, weight, bias, out)
        return out

    # -------------------------------------------------------------------------------------- planning

    def _plan(self, key, x, weight, bias, stride, padding) -> _Plan:
        graph, operands, names = self._graph(x, weight, bias, stride, padding)

        def tune() -> str:
            return self._fastest(graph, operands, names, x, weight, bias, stride, padding)

        name = self.book.choose(key, tune)
        if name == PYTORCH_PLAN:
            return _Plan(name)
        if triton_conv.is_plan_name(name):
            if not triton_conv.covers(x, weight, bias, stride, padding):
                raise RuntimeError(f"the recorded plan {name!r} for the convolution {key} is a Triton kernel, which "
                                   "does not run this convolution here (no Triton, or not on a GPU)")
            return _Plan(name, triton=triton_conv.config_of(name))
        if cutlass_conv.is_plan_name(name):
            if not cutlass_conv.covers(x, weight, bias, stride, padding):
                raise RuntimeError(f"the recorded plan {name!r} for the convolution {key} is a CUTLASS kernel, "
                                   "which runs bf16 causal convs on an sm_90 GPU only")
            kernels = cutlass_conv.require_kernels(name)
            return _Plan(name, cutlass=cutlass_conv.config_of(name, kernels.version))
        if name not in names:
            raise RuntimeError(f"the recorded cuDNN plan {name!r} for the convolution {key} is not offered by this "
                               "cuDNN; the build's plans were recorded with other software (start over with "
                               "--overwrite, or use the same software)")
        index = names[name]
        graph.build_plan_at_index(index)
        return _Plan(name, graph, index, operands, graph.get_workspace_size_plan_at_index(index))

    def _graph(self, x, weight, bias, stride, padding) -> tuple[Any, tuple, dict[str, int]]:
        """A graph of this one convolution, and its candidate plans {name: index}; no candidates when cuDNN
        offers no engine plan for it (PyTorch's call then runs it)."""
        cudnn = self.cudnn
        dims = x.dim() - 2
        out = self._output(x, weight, stride, padding)
        graph = cudnn.pygraph(io_data_type=_cudnn_type(cudnn, x.dtype), intermediate_data_type=cudnn.data_type.FLOAT,
                              compute_data_type=cudnn.data_type.FLOAT, handle=self._handle(x.device))
        image, kernel = graph.tensor_like(x), graph.tensor_like(weight)
        y = graph.conv_fprop(image=image, weight=kernel, padding=list(_tuple(padding, dims)),
                             stride=list(_tuple(stride, dims)), dilation=[1] * dims,
                             compute_data_type=cudnn.data_type.FLOAT)
        shift = None
        if bias is not None:
            shift = graph.tensor_like(bias.view(1, -1, *[1] * dims))
            y = graph.bias(input=y, bias=shift, compute_data_type=cudnn.data_type.FLOAT)
        y.set_output(True).set_data_type(_cudnn_type(cudnn, x.dtype)).set_dim(list(out.shape)).set_stride(
            list(out.stride()))
        names: dict[str, int] = {}
        try:
            graph.validate()
            graph.build_operation_graph()
            graph.deselect_numeric_notes([cudnn.numerical_note.REDUCED_PRECISION_REDUCTION,
                                          cudnn.numerical_note.NONDETERMINISTIC])
            graph.deselect_behavior_notes([cudnn.behavior_note.RUNTIME_COMPILATION])
            graph.create_execution_plans([cudnn.heur_mode.B, cudnn.heur_mode.A])
            for index in range(graph.get_execution_plan_count()):
                name = graph.get_plan_name_at_index(index)
                if name.startswith("eng") and name not in names:
                    names[name] = index
        except Exception as error:  # noqa: BLE001 - cuDNN declining a graph means PyTorch's call runs it
            self.declined[signature(x, weight, bias, stride, padding)] = f"{type(error).__name__}: {error}"[:500]
            names = {}
        return graph, (image, kernel, shift, y), names

    def _fastest(self, graph, operands, names, x, weight, bias, stride, padding) -> str:
        """Time PyTorch's call and the first candidate plans on these operands; the fastest name."""
        timings = {PYTORCH_PLAN: _seconds(lambda: torch_conv(x, weight, bias, stride, padding))}
        if triton_conv.covers(x, weight, bias, stride, padding):
            taps = self._weight_taps(weight)
            for config in triton_conv.candidates(x.shape[1], weight.shape[0]):
                try:
                    timings[triton_conv.plan_name(config)] = _seconds(
                        lambda c=config: triton_conv.conv3d_causal(x, taps, c))
                except Exception:  # noqa: BLE001 - a config that does not compile or fit is not a candidate
                    continue
        kernels = cutlass_conv.kernels() if cutlass_conv.covers(x, weight, bias, stride, padding) else None
        for label in cutlass_conv.candidates(x.shape[1], weight.shape[0]) if kernels else ():
            try:
                timings[cutlass_conv.plan_name(label, kernels.version)] = _seconds(
                    lambda c=label: kernels.conv(c, x, weight))
            except Exception:  # noqa: BLE001 - a config that cannot run this problem is not a candidate
                continue
        out = self._output(x, weight, stride, padding)
        for name, index in list(names.items())[:CANDIDATE_PLANS]:
            try:
                graph.build_plan_at_index(index)
                plan = _Plan(name, graph, index, operands, graph.get_workspace_size_plan_at_index(index))
                timings[name] = _seconds(lambda p=plan: self._execute(p, x, weight, bias, out))
            except Exception:  # noqa: BLE001 - a plan that does not build or run is not a candidate
                continue
        return min(timings, key=lambda n: (timings[n], n))

    # ------------------------------------------------------------------------------------- execution

    def _execute(self, plan: _Plan, x, weight, bias, out) -> None:
        image, kernel, shift, y = plan.operands
        tensors = {image: x, kernel: weight, y: out}
        if shift is not None:
            tensors[shift] = bias.view(1, -1, *[1] * (x.dim() - 2))
        workspace = torch.empty(max(plan.workspace, 1), device=x.device, dtype=torch.uint8)
        handle = self._handle(x.device)
        self.cudnn.set_stream(handle, torch.cuda.current_stream(x.device).cuda_stream)
        plan.graph.execute_plan_at_index(tensors, workspace, plan.index, handle)

    def _weight_taps(self, weight: torch.Tensor) -> torch.Tensor:
        """The weight as the Triton kernel reads it ([27, C, Cout]), made once per weight tensor (the weight is
        held with it, so its storage is not reused for another while the entry lives)."""
        key = (weight.data_ptr(), tuple(weight.shape), tuple(weight.stride()))
        if key not in self._taps:
            self._taps[key] = (weight, triton_conv.weight_taps(weight))
        return self._taps[key][1]

    def _handle(self, device: torch.device) -> Any:
        index = device.index if device.index is not None else torch.cuda.current_device()
        if index not in self._handles:
            with torch.cuda.device(index):
                self._handles[index] = self.cudnn.create_handle()
        return self._handles[index]

    @staticmethod
    def _output(x, weight, stride, padding) -> torch.Tensor:
        dims = x.dim() - 2
        strides, pads = _tuple(stride, dims), _tuple(padding, dims)
        size = [(x.shape[2 + d] + 2 * pads[d] - weight.shape[2 + d]) // strides[d] + 1 for d in range(dims)]
        layout = torch.channels_last_3d if dims == 3 else torch.channels_last
        return torch.empty((x.shape[0], weight.shape[0], *size), dtype=x.dtype, device=x.device,
                           memory_format=layout)


def _cudnn_type(cudnn, dtype: torch.dtype):
    return {torch.bfloat16: cudnn.data_type.BFLOAT16, torch.float16: cudnn.data_type.HALF}[dtype]


def _seconds(run) -> float:
    """Median seconds of run() on the GPU after one warm-up call."""
    run()
    samples = []
    for _ in range(TIMING_REPS):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        run()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end))
    return statistics.median(samples) / 1e3
