"""gearbox: compile and run deep-learning models (ONNX, .gbm) from Python with numpy arrays.

    import gearbox
    s = gearbox.Session("model.onnx", threads=2)
    out = s.run({"x": x})                      # {output name: numpy array}

Code written for ONNX Runtime runs with ``import gearbox as onnxruntime`` (InferenceSession,
SessionOptions, get_available_providers, its exception classes). See docs/python.md.

The package is a compiled module, gearbox._C (src/python/), under pure-Python files: _ort (the
ONNX Runtime surface), _tools (compile, smi, doctor, explain), _errors (exceptions). The
framework layer's training API binds into the same two halves when it comes.
"""
from gearbox import _C
from gearbox._C import IoInfo, Session, __version__
from gearbox._errors import (EngineError, EPFail, Fail, GearboxError, InvalidArgument, InvalidGraph,
                             InvalidProtobuf, ModelLoaded, NoModel, NoSuchFile, NotImplemented,
                             RuntimeException)
from gearbox._ort import (ExecutionMode, GraphOptimizationLevel, InferenceSession, ModelMetadata, RunOptions,
                          SessionOptions, get_all_providers, get_available_providers, get_device)
from gearbox._tools import compile, doctor, explain, smi
from gearbox import capi  # noqa: F401  (onnxruntime.capi.onnxruntime_pybind11_state)

# ONNX Runtime's name for what a session's get_inputs()/get_outputs() return.
NodeArg = IoInfo

__all__ = ["Session", "IoInfo", "NodeArg", "GearboxError", "InferenceSession", "SessionOptions", "RunOptions",
           "GraphOptimizationLevel", "ExecutionMode", "get_available_providers", "get_device", "doctor", "smi",
           "explain", "__version__"]
