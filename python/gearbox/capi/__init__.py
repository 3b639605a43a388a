"""Where ONNX Runtime keeps its exception classes: ``onnxruntime.capi.onnxruntime_pybind11_state``
names them, so code written for it (``import gearbox as onnxruntime``) finds them here."""
from gearbox.capi import onnxruntime_pybind11_state  # noqa: F401
