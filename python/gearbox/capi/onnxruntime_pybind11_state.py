"""ONNX Runtime's exception classes, as gearbox raises them (see gearbox._errors)."""
from gearbox._errors import (EngineError, EPFail, Fail, InvalidArgument, InvalidGraph,  # noqa: F401
                             InvalidProtobuf, ModelLoaded, NoModel, NoSuchFile, NotImplemented,
                             RuntimeException)
