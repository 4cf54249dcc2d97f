"""cuDNN's engine plans as named plans: one cuDNN graph per convolution signature (shapes, strides, stride, padding,
bias or not), built with the cuDNN frontend (nvidia-cudnn-frontend), and the plan of the recorded name run on it.

Candidates are the first engine plans cuDNN's heuristics (modes B then A) rank. Only backend engine plans are
offered (precompiled, no runtime compilation, reproducible bits run to run), and none that reduce in reduced
precision. A plan's name is cuDNN's own (`eng...`); a book's key holds the cuDNN and frontend versions.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from .conv_kernel import Runner, as_tuple, conv_output, signature

CANDIDATE_PLANS = 8  # engine plans timed per signature, in the heuristics' ranking
PLAN_PREFIX = "eng"


def frontend() -> Any | None:
    """The cuDNN frontend module, or None where it does not import (absent, or built for another CUDA)."""
    try:
        import cudnn
    except Exception:  # noqa: BLE001 - absent or broken: no plans can be built here
        return None
    return cudnn


@dataclass
class _Graph:
    """One signature's graph, the tensors its operands bind to, and its candidate plans {name: index} (none where
    cuDNN offers no engine plan for it)."""

    graph: Any
    operands: tuple  # (image, weight, bias or None, output) graph tensors
    names: dict[str, int]
    stride: Any
    padding: Any


class CudnnGraphKernels:
    """The cuDNN family (ConvKernel): CUDA, bf16 or fp16, any dense layout."""

    family = "cudnn"
    environment_key = "cudnn_frontend"
    requirements = "the cuDNN frontend: pip install 'latentforge[gpu]' (nvidia-cudnn-frontend)"

    def __init__(self):
        self._handles: dict[int, Any] = {}
        self.declined: dict[str, str] = {}  # signature -> why cuDNN offered no engine plan (PyTorch's call runs it)

    def version(self, device: torch.device) -> str | None:
        cudnn = frontend()
        if cudnn is None or torch.device(device).type != "cuda":
            return None
        return f"{torch.backends.cudnn.version()}_fe{cudnn.__version__}"

    def environment_version(self, device: torch.device) -> str:
        cudnn = frontend()
        return "none" if cudnn is None else str(getattr(cudnn, "__version__", "unknown"))

    def available(self, device: torch.device) -> bool:
        return self.version(device) is not None

    def owns(self, plan: str) -> bool:
        return plan.startswith(PLAN_PREFIX)

    def covers(self, x, weight, bias, stride, padding) -> bool:
        return x.is_cuda and x.dtype in (torch.bfloat16, torch.float16) and frontend() is not None

    def candidates(self, x, weight, bias, stride, padding, prepared) -> dict[str, Runner]:
        built = self._graph(x, weight, bias, stride, padding)
        return {name: self._lazy_runner(built, index)
                for name, index in list(built.names.items())[:CANDIDATE_PLANS]}

    def runner(self, plan, key, x, weight, bias, stride, padding, prepared) -> Runner:
        built = self._graph(x, weight, bias, stride, padding)
        if plan not in built.names:
            raise RuntimeError(f"the recorded cuDNN plan {plan!r} for the convolution {key} is not offered by this "
                               "cuDNN; the build's plans were recorded with other software (start over with "
                               "--overwrite, or use the same software)")
        return self._built_runner(built, built.names[plan])

    # -------------------------------------------------------------------------------------- graphs

    def _graph(self, x, weight, bias, stride, padding) -> _Graph:
        cudnn = frontend()
        dims = x.dim() - 2
        out = conv_output(x, weight, stride, padding)
        graph = cudnn.pygraph(io_data_type=_cudnn_type(cudnn, x.dtype), intermediate_data_type=cudnn.data_type.FLOAT,
                              compute_data_type=cudnn.data_type.FLOAT, handle=self._handle(x.device))
        image, kernel = graph.tensor_like(x), graph.tensor_like(weight)
        y = graph.conv_fprop(image=image, weight=kernel, padding=list(as_tuple(padding, dims)),
                             stride=list(as_tuple(stride, dims)), dilation=[1] * dims,
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
                if name.startswith(PLAN_PREFIX) and name not in names:
                    names[name] = index
        except Exception as error:  # noqa: BLE001 - cuDNN declining a graph means PyTorch's call runs it
            self.declined[signature(x, weight, bias, stride, padding)] = f"{type(error).__name__}: {error}"[:500]
            names = {}
        return _Graph(graph, (image, kernel, shift, y), names, stride, padding)

    def _lazy_runner(self, built: _Graph, index: int) -> Runner:
        """A runner that builds its plan at the first call (a plan that does not build is then not a candidate)."""
        state: dict[str, Runner] = {}

        def run(x, weight, bias):
            if "run" not in state:
                state["run"] = self._built_runner(built, index)
            return state["run"](x, weight, bias)

        return run

    def _built_runner(self, built: _Graph, index: int) -> Runner:
        built.graph.build_plan_at_index(index)
        workspace_size = built.graph.get_workspace_size_plan_at_index(index)
        image, kernel, shift, y = built.operands

        def run(x, weight, bias):
            out = conv_output(x, weight, built.stride, built.padding)
            tensors = {image: x, kernel: weight, y: out}
            if shift is not None:
                tensors[shift] = bias.view(1, -1, *[1] * (x.dim() - 2))
            workspace = torch.empty(max(workspace_size, 1), device=x.device, dtype=torch.uint8)
            handle = self._handle(x.device)
            frontend().set_stream(handle, torch.cuda.current_stream(x.device).cuda_stream)
            built.graph.execute_plan_at_index(tensors, workspace, index, handle)
            return out

        return run

    def _handle(self, device: torch.device) -> Any:
        index = device.index if device.index is not None else torch.cuda.current_device()
        if index not in self._handles:
            with torch.cuda.device(index):
                self._handles[index] = frontend().create_handle()
        return self._handles[index]


def _cudnn_type(cudnn, dtype: torch.dtype):
    return {torch.bfloat16: cudnn.data_type.BFLOAT16, torch.float16: cudnn.data_type.HALF}[dtype]


FAMILY = CudnnGraphKernels()
