"""An ONNX graph run with PyTorch ops, on any torch device, in a chosen float precision.

The CUDA backend runs the tier's own ONNX graphs (the contract every backend shares) on the GPU
through this interpreter. The library for the job, onnx2torch, cannot take these graphs: it has
no converter for GreaterOrEqual (opset 16) or Pad (opset 18), nor for a Clip whose bounds are
inputs, and it imports torchvision; so the operators the tiers use are written here, each after
the ONNX operator specification, and tests/pipeline/test_torch_backend.py checks every stage of
every shipped tier against ONNX Runtime.

Shapes are host values: `Shape` gives a CPU tensor, and an operator whose inputs are all on the
CPU runs there, so the size arithmetic of a graph (Shape, Gather, Concat, Reshape targets) never
waits on the device. Float tensors on the device are in `dtype`; integer and boolean ones keep
their ONNX type. Outputs that are float come back as float32.

Not thread-safe on its own: the backend gives each stage one lock.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, overload

import onnx
import torch
import torch.nn.functional as F
from onnx import numpy_helper

Tensor = torch.Tensor
_INT64_MAX = 2**63 - 1
_DTYPES: dict[int, torch.dtype] = {
    onnx.TensorProto.FLOAT: torch.float32,
    onnx.TensorProto.FLOAT16: torch.float16,
    onnx.TensorProto.BFLOAT16: torch.bfloat16,
    onnx.TensorProto.DOUBLE: torch.float64,
    onnx.TensorProto.INT64: torch.int64,
    onnx.TensorProto.INT32: torch.int32,
    onnx.TensorProto.BOOL: torch.bool,
    onnx.TensorProto.UINT8: torch.uint8,
}


class OnnxGraph:
    """`graph(inputs)` -> outputs, by name, for one ONNX file."""

    def __init__(self, path: Path, device: torch.device, dtype: torch.dtype) -> None:
        model = onnx.load(str(path))
        self.device, self.dtype = device, dtype
        self.keep: list[Tensor] | None = None  # host buffers of a graph being captured
        graph = model.graph
        known = {i.name for i in graph.initializer}
        self.inputs = [i.name for i in graph.input if i.name not in known]
        self.outputs = [o.name for o in graph.output]
        self.constants: dict[str, Tensor] = {
            i.name: self._place(torch.from_numpy(numpy_helper.to_array(i).copy()))
            for i in graph.initializer
        }
        self.nodes: list[tuple[str, list[str], list[str], dict[str, Any]]] = []
        for node in graph.node:
            attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
            if node.op_type == "Constant":
                self.constants[node.output[0]] = self._place(_constant(attrs))
                continue
            if node.op_type not in _OPS:
                raise NotImplementedError(f"{path.name}: no torch operator for {node.op_type}")
            self.nodes.append((node.op_type, list(node.input), list(node.output), attrs))

    def __call__(self, inputs: dict[str, Tensor]) -> dict[str, Tensor]:
        env = dict(self.constants)
        for name in self.inputs:
            env[name] = self._place(inputs[name])
        for op, names, outs, attrs in self.nodes:
            args = [env[n] if n else None for n in names]
            results = _OPS[op](self, attrs, *args)
            for name, value in zip(outs, results, strict=False):
                if name:
                    env[name] = value
        return {
            name: env[name].float() if env[name].is_floating_point() else env[name]
            for name in self.outputs
        }

    def _place(self, tensor: Tensor) -> Tensor:
        """Floats to the device in the compute precision; integers and booleans stay where
        they are (shapes: on the host)."""
        if tensor.is_floating_point():
            return self.to(tensor.to(self.dtype), self.device)
        return tensor

    def device_of(self, *tensors: Tensor | None) -> torch.device:
        """Where an operator runs: on the device if any input is there, else on the host."""
        on_device = any(t is not None and t.device != torch.device("cpu") for t in tensors)
        return self.device if on_device else torch.device("cpu")

    @overload
    def together(self, *tensors: Tensor) -> list[Tensor]: ...
    @overload
    def together(self, *tensors: Tensor | None) -> list[Tensor | None]: ...
    def together(self, *tensors: Tensor | None) -> list[Tensor] | list[Tensor | None]:
        where = self.device_of(*tensors)
        return [None if t is None else self.to(t, where) for t in tensors]

    def to(self, tensor: Tensor, where: torch.device) -> Tensor:
        """`tensor` on `where`. While a CUDA graph is captured, a host value goes through
        pinned memory kept with the graph: a copy from pageable memory cannot be captured, and
        the graph's replays read the same host buffer (its values depend only on the shapes,
        which a graph fixes)."""
        if tensor.device == where:
            return tensor
        if self.keep is not None and tensor.device.type == "cpu":
            tensor = tensor.pin_memory()
            self.keep.append(tensor)
        return tensor.to(where, non_blocking=True)

    def cast(self, tensor: Tensor, to: int) -> Tensor:
        dtype = _DTYPES[to]
        if dtype.is_floating_point:
            if tensor.device == torch.device("cpu") and not tensor.is_floating_point():
                return tensor.to(torch.float32)  # host arithmetic on sizes stays exact
            dtype = self.dtype
        return tensor.to(dtype)


def _constant(attrs: dict[str, Any]) -> Tensor:
    if "value" in attrs:
        return torch.from_numpy(numpy_helper.to_array(attrs["value"]).copy())
    for key, dtype in (("value_float", torch.float32), ("value_int", torch.int64)):
        if key in attrs:
            return torch.tensor(attrs[key], dtype=dtype)
    for key, dtype in (("value_floats", torch.float32), ("value_ints", torch.int64)):
        if key in attrs:
            return torch.tensor(list(attrs[key]), dtype=dtype)
    raise NotImplementedError(f"Constant with {sorted(attrs)}")


def _ints(tensor: Tensor | None) -> list[int]:
    return [] if tensor is None else [int(v) for v in tensor.reshape(-1).tolist()]


def _axis(axis: int, rank: int) -> int:
    return axis + rank if axis < 0 else axis


def _elementwise(fn: Callable[..., Tensor]) -> Callable[..., list[Tensor]]:
    def op(g: OnnxGraph, attrs: dict[str, Any], *xs: Tensor) -> list[Tensor]:
        return [fn(*g.together(*xs))]

    return op


def _gather(g: OnnxGraph, attrs: dict[str, Any], x: Tensor, idx: Tensor) -> list[Tensor]:
    x, idx = g.together(x, idx)
    axis = _axis(attrs.get("axis", 0), x.dim())
    idx = torch.where(idx < 0, idx + x.shape[axis], idx)
    picked = x.index_select(axis, idx.reshape(-1))
    return [picked.reshape((*x.shape[:axis], *idx.shape, *x.shape[axis + 1 :]))]


def _gather_elements(g: OnnxGraph, attrs: dict[str, Any], x: Tensor, idx: Tensor) -> list[Tensor]:
    x, idx = g.together(x, idx)
    axis = _axis(attrs.get("axis", 0), x.dim())
    idx = torch.where(idx < 0, idx + x.shape[axis], idx)
    return [torch.gather(x, axis, idx)]


def _slice(
    g: OnnxGraph,
    attrs: dict[str, Any],
    x: Tensor,
    starts: Tensor,
    ends: Tensor,
    axes: Tensor | None = None,
    steps: Tensor | None = None,
) -> list[Tensor]:
    starts_, ends_ = _ints(starts), _ints(ends)
    axes_ = _ints(axes) or list(range(len(starts_)))
    steps_ = _ints(steps) or [1] * len(starts_)
    index = [slice(None)] * x.dim()
    flips = []
    for start, end, axis, step in zip(starts_, ends_, axes_, steps_, strict=True):
        axis, size = _axis(axis, x.dim()), x.shape[_axis(axis, x.dim())]
        if step > 0:
            start = max(0, min(size, start + size if start < 0 else start))
            end = max(0, min(size, end + size if end < 0 else end))
            index[axis] = slice(start, end, step)
        else:  # torch has no negative steps: flip, then slice forwards
            start = max(-1, min(size - 1, start + size if start < 0 else start))
            end = max(-1, min(size - 1, end + size if end < 0 else end))
            index[axis] = slice(size - 1 - start, size - 1 - end, -step)
            flips.append(axis)
    if flips:
        x = x.flip(flips)
    return [x[tuple(index)]]


def _reshape(g: OnnxGraph, attrs: dict[str, Any], x: Tensor, shape: Tensor) -> list[Tensor]:
    target = _ints(shape)
    if not attrs.get("allowzero", 0):
        target = [x.shape[i] if v == 0 else v for i, v in enumerate(target)]
    return [x.reshape(target)]


def _unsqueeze(g: OnnxGraph, attrs: dict[str, Any], x: Tensor, axes: Tensor) -> list[Tensor]:
    rank = x.dim() + len(_ints(axes))
    for axis in sorted(_axis(a, rank) for a in _ints(axes)):
        x = x.unsqueeze(axis)
    return [x]


def _squeeze(
    g: OnnxGraph, attrs: dict[str, Any], x: Tensor, axes: Tensor | None = None
) -> list[Tensor]:
    if axes is None:
        return [x.squeeze()]
    for axis in sorted((_axis(a, x.dim()) for a in _ints(axes)), reverse=True):
        x = x.squeeze(axis)
    return [x]


def _concat(g: OnnxGraph, attrs: dict[str, Any], *xs: Tensor) -> list[Tensor]:
    parts = g.together(*xs)
    dtype = next((p.dtype for p in parts if p.is_floating_point()), parts[0].dtype)
    return [torch.cat([p.to(dtype) for p in parts], dim=attrs["axis"])]


def _transpose(g: OnnxGraph, attrs: dict[str, Any], x: Tensor) -> list[Tensor]:
    perm = attrs.get("perm") or list(reversed(range(x.dim())))
    return [x.permute(*perm)]


def _conv(
    g: OnnxGraph, attrs: dict[str, Any], x: Tensor, w: Tensor, b: Tensor | None = None
) -> list[Tensor]:
    dims = w.dim() - 2
    strides = attrs.get("strides", [1] * dims)
    dilations = attrs.get("dilations", [1] * dims)
    pads = list(attrs.get("pads", [0] * 2 * dims))
    if attrs.get("auto_pad", b"NOTSET") not in (b"NOTSET", "NOTSET"):
        raise NotImplementedError("Conv auto_pad")
    begin, end = pads[:dims], pads[dims:]
    if begin != end:  # torch pads both sides alike: the rest by hand, last axis first
        x = F.pad(x, [p for i in reversed(range(dims)) for p in (begin[i], end[i])])
        begin = [0] * dims
    conv = F.conv1d if dims == 1 else F.conv2d
    return [conv(x, w, b, strides, begin, dilations, attrs.get("group", 1))]


def _gemm(
    g: OnnxGraph, attrs: dict[str, Any], a: Tensor, b: Tensor, c: Tensor | None = None
) -> list[Tensor]:
    a = a.t() if attrs.get("transA", 0) else a
    b = b.t() if attrs.get("transB", 0) else b
    y = attrs.get("alpha", 1.0) * (a @ b)
    return [y if c is None else y + attrs.get("beta", 1.0) * c]


def _layer_norm(
    g: OnnxGraph, attrs: dict[str, Any], x: Tensor, scale: Tensor, bias: Tensor | None = None
) -> list[Tensor]:
    axis = _axis(attrs.get("axis", -1), x.dim())
    eps = attrs.get("epsilon", 1e-5)
    return [F.layer_norm(x, tuple(x.shape[axis:]), scale, bias, eps)]


def _softmax(g: OnnxGraph, attrs: dict[str, Any], x: Tensor) -> list[Tensor]:
    return [torch.softmax(x, dim=attrs.get("axis", -1))]


def _reduce(fn: str) -> Callable[..., list[Tensor]]:
    def op(
        g: OnnxGraph, attrs: dict[str, Any], x: Tensor, axes: Tensor | None = None
    ) -> list[Tensor]:
        dims = _ints(axes) or list(attrs.get("axes", []))
        keep = bool(attrs.get("keepdims", 1))
        if not dims:
            if attrs.get("noop_with_empty_axes", 0):
                return [x]
            dims = list(range(x.dim()))
        if fn == "sum":
            return [x.sum(dim=dims, keepdim=keep)]
        if fn == "mean":
            return [x.mean(dim=dims, keepdim=keep)]
        if fn == "min":
            return [x.amin(dim=dims, keepdim=keep)]
        return [x.amax(dim=dims, keepdim=keep)]

    return op


def _clip(
    g: OnnxGraph,
    attrs: dict[str, Any],
    x: Tensor,
    low: Tensor | None = None,
    high: Tensor | None = None,
) -> list[Tensor]:
    placed, low, high = g.together(x, low, high)
    assert placed is not None  # `together` gives None only for a None
    return [torch.clamp(placed, min=low, max=high)]


def _cast(g: OnnxGraph, attrs: dict[str, Any], x: Tensor) -> list[Tensor]:
    return [g.cast(x, attrs["to"])]


def _shape(g: OnnxGraph, attrs: dict[str, Any], x: Tensor) -> list[Tensor]:
    dims = list(x.shape)[attrs.get("start", 0) : attrs.get("end", x.dim())]
    return [torch.tensor(dims, dtype=torch.int64)]


def _constant_of_shape(g: OnnxGraph, attrs: dict[str, Any], shape: Tensor) -> list[Tensor]:
    value = _constant({"value": attrs["value"]}) if "value" in attrs else torch.zeros(1)
    value = g._place(value)
    return [value.reshape(()).expand(_ints(shape)).clone()]


def _expand(g: OnnxGraph, attrs: dict[str, Any], x: Tensor, shape: Tensor) -> list[Tensor]:
    target = _ints(shape)
    rank = max(len(target), x.dim())
    target = [1] * (rank - len(target)) + target
    have = [1] * (rank - x.dim()) + list(x.shape)
    return [x.reshape(have).expand([max(t, h) for t, h in zip(target, have, strict=True)])]


def _topk(g: OnnxGraph, attrs: dict[str, Any], x: Tensor, k: Tensor) -> list[Tensor]:
    values, indices = torch.topk(
        x,
        _ints(k)[0],
        dim=attrs.get("axis", -1),
        largest=bool(attrs.get("largest", 1)),
        sorted=bool(attrs.get("sorted", 1)),
    )
    return [values, indices]


def _pad(
    g: OnnxGraph,
    attrs: dict[str, Any],
    x: Tensor,
    pads: Tensor,
    value: Tensor | None = None,
    axes: Tensor | None = None,
) -> list[Tensor]:
    amounts = _ints(pads)
    axes_ = [_axis(a, x.dim()) for a in _ints(axes)] or list(range(x.dim()))
    n = len(axes_)
    widths = dict.fromkeys(range(x.dim()), (0, 0))
    for i, axis in enumerate(axes_):
        widths[axis] = (amounts[i], amounts[i + n])
    flat = [p for axis in reversed(range(x.dim())) for p in widths[axis]]
    if attrs.get("mode", b"constant") not in (b"constant", "constant"):
        raise NotImplementedError(f"Pad mode {attrs['mode']!r}")
    fill = 0.0 if value is None else float(value.reshape(-1)[0])
    return [F.pad(x, flat, value=fill)]


def _max_pool(g: OnnxGraph, attrs: dict[str, Any], x: Tensor) -> list[Tensor]:
    kernel = attrs["kernel_shape"]
    dims = len(kernel)
    pads = list(attrs.get("pads", [0] * 2 * dims))
    if pads[:dims] != pads[dims:]:
        x = F.pad(
            x,
            [p for i in reversed(range(dims)) for p in (pads[i], pads[i + dims])],
            value=float("-inf"),
        )
        pads = [0] * 2 * dims
    pool = F.max_pool1d if dims == 1 else F.max_pool2d
    return [
        pool(
            x,
            kernel,
            attrs.get("strides", [1] * dims),
            pads[:dims],
            attrs.get("dilations", [1] * dims),
            ceil_mode=bool(attrs.get("ceil_mode", 0)),
        )
    ]


def _average_pool(g: OnnxGraph, attrs: dict[str, Any], x: Tensor) -> list[Tensor]:
    kernel = list(attrs["kernel_shape"])
    if len(kernel) != 2:
        raise NotImplementedError(f"AveragePool over {len(kernel)} axes")
    pads = list(attrs.get("pads", [0, 0, 0, 0]))
    include = bool(attrs.get("count_include_pad", 0))
    if pads[:2] != pads[2:]:
        raise NotImplementedError(f"AveragePool with uneven pads {pads}")
    return [
        F.avg_pool2d(
            x,
            kernel,
            list(attrs.get("strides", [1, 1])),
            pads[:2],
            ceil_mode=bool(attrs.get("ceil_mode", 0)),
            count_include_pad=include,
        )
    ]


def _grid_sample(g: OnnxGraph, attrs: dict[str, Any], x: Tensor, grid: Tensor) -> list[Tensor]:
    x, grid = g.together(x, grid)

    def text(key: str, default: str) -> str:
        value = attrs.get(key, default)
        return value.decode() if isinstance(value, bytes) else value

    mode = {"linear": "bilinear", "cubic": "bicubic"}.get(text("mode", "linear"), "nearest")
    return [
        F.grid_sample(
            x,
            grid,
            mode=mode,
            padding_mode=text("padding_mode", "zeros"),
            align_corners=bool(attrs.get("align_corners", 0)),
        )
    ]


def _flatten(g: OnnxGraph, attrs: dict[str, Any], x: Tensor) -> list[Tensor]:
    axis = _axis(attrs.get("axis", 1), x.dim())
    return [x.reshape(int(torch.tensor(x.shape[:axis]).prod()), -1)]


def _range(g: OnnxGraph, attrs: dict[str, Any], *bounds: Tensor) -> list[Tensor]:
    start, limit, delta = (b.reshape(()) for b in bounds)
    return [
        torch.arange(start.item(), limit.item(), delta.item(), device=start.device).to(start.dtype)
    ]


def _fold(fn: Callable[[Tensor, Tensor], Tensor]) -> Callable[..., list[Tensor]]:
    """ONNX Max / Min: any number of inputs, broadcast."""

    def op(g: OnnxGraph, attrs: dict[str, Any], *xs: Tensor) -> list[Tensor]:
        out, *rest = g.together(*xs)
        for x in rest:
            out = fn(out, x)
        return [out]

    return op


def _mod(g: OnnxGraph, attrs: dict[str, Any], a: Tensor, b: Tensor) -> list[Tensor]:
    a, b = g.together(a, b)
    return [torch.fmod(a, b) if attrs.get("fmod", 0) else torch.remainder(a, b)]


def _where(g: OnnxGraph, attrs: dict[str, Any], c: Tensor, a: Tensor, b: Tensor) -> list[Tensor]:
    c, a, b = g.together(c, a, b)
    return [torch.where(c, a, b)]


def _arith(fn: Callable[[Tensor, Tensor], Tensor]) -> Callable[..., list[Tensor]]:
    def op(g: OnnxGraph, attrs: dict[str, Any], a: Tensor, b: Tensor) -> list[Tensor]:
        a, b = g.together(a, b)
        if a.is_floating_point() != b.is_floating_point():  # a size meets a float
            a, b = (a, b.to(a.dtype)) if a.is_floating_point() else (a.to(b.dtype), b)
        return [fn(a, b)]

    return op


def _div(a: Tensor, b: Tensor) -> Tensor:
    if a.is_floating_point():
        return a / b
    return torch.div(a, b, rounding_mode="trunc")  # ONNX integer Div truncates


_OPS: dict[str, Callable[..., Sequence[Tensor]]] = {
    "Add": _arith(torch.add),
    "Sub": _arith(torch.sub),
    "Mul": _arith(torch.mul),
    "Div": _arith(_div),
    "Equal": _arith(torch.eq),
    "Less": _arith(torch.lt),
    "LessOrEqual": _arith(torch.le),
    "Greater": _arith(torch.gt),
    "Pow": _arith(torch.pow),
    "Max": _fold(torch.maximum),
    "Min": _fold(torch.minimum),
    "GreaterOrEqual": _arith(torch.ge),
    "And": _arith(torch.logical_and),
    "Xor": _arith(torch.logical_xor),
    "MatMul": _arith(torch.matmul),
    "Not": _elementwise(torch.logical_not),
    "Erf": _elementwise(torch.erf),
    "Exp": _elementwise(torch.exp),
    "Log": _elementwise(torch.log),
    "Cos": _elementwise(torch.cos),
    "Sin": _elementwise(torch.sin),
    "Sigmoid": _elementwise(torch.sigmoid),
    "Sqrt": _elementwise(torch.sqrt),
    "Round": _elementwise(torch.round),  # half to even, as ONNX
    "Neg": _elementwise(torch.neg),
    "Reciprocal": _elementwise(torch.reciprocal),
    "Relu": _elementwise(torch.relu),
    "Identity": _elementwise(lambda x: x),
    "Mod": _mod,
    "Where": _where,
    "Gather": _gather,
    "GatherElements": _gather_elements,
    "Slice": _slice,
    "Reshape": _reshape,
    "Unsqueeze": _unsqueeze,
    "Squeeze": _squeeze,
    "Concat": _concat,
    "Transpose": _transpose,
    "Conv": _conv,
    "Gemm": _gemm,
    "LayerNormalization": _layer_norm,
    "Softmax": _softmax,
    "ReduceMax": _reduce("max"),
    "ReduceSum": _reduce("sum"),
    "ReduceMean": _reduce("mean"),
    "ReduceMin": _reduce("min"),
    "Clip": _clip,
    "Cast": _cast,
    "Shape": _shape,
    "ConstantOfShape": _constant_of_shape,
    "Expand": _expand,
    "TopK": _topk,
    "Pad": _pad,
    "MaxPool": _max_pool,
    "AveragePool": _average_pool,
    "GridSample": _grid_sample,
    "Flatten": _flatten,
    "Range": _range,
}
