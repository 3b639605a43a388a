"""gearbox's exceptions.

Every error gearbox reports has a code from its catalogue (``gearbox explain CODE``, docs/errors.md).
In Python it is raised as a :class:`GearboxError` carrying that code, its name, the message and
the catalogue's likely cause and fix. The class raised is one of ONNX Runtime's exception classes
(``onnxruntime.capi.onnxruntime_pybind11_state.InvalidArgument`` ...), all subclasses of
GearboxError, chosen by the code, so code written for ONNX Runtime catches what it caught there
and code written for gearbox can catch GearboxError and read ``.code``.
"""


class GearboxError(Exception):
    """An error gearbox reported: ``code`` (4002), ``name`` ('INPUT_UNKNOWN'), ``message``,
    ``cause`` and ``fix``; ``str(e)`` is the one-line form the CLI prints
    ("GBX-E4002 INPUT_UNKNOWN: ...")."""

    def __init__(self, text="", code=0, name="", message="", cause="", fix=""):
        super().__init__(text)
        self.code = code
        self.name = name
        self.message = message or text
        self.cause = cause
        self.fix = fix


# ONNX Runtime's classes (its onnxruntime_pybind11_state module registers these names).
class Fail(GearboxError):
    pass


class InvalidArgument(GearboxError):
    pass


class NoSuchFile(GearboxError):
    pass


class NoModel(GearboxError):
    pass


class EngineError(GearboxError):
    pass


class RuntimeException(GearboxError):
    pass


class InvalidProtobuf(GearboxError):
    pass


class ModelLoaded(GearboxError):
    pass


class NotImplemented(GearboxError):  # noqa: A001 - ONNX Runtime's name
    pass


class InvalidGraph(GearboxError):
    pass


class EPFail(GearboxError):
    pass


# Catalogue code -> class, where the code's range (below) does not decide it.
_BY_CODE = {
    1001: NoSuchFile,  # FILE_NOT_FOUND
    1002: InvalidProtobuf,  # FILE_EMPTY
    1003: Fail,  # FILE_WRITE_FAILED
    2001: InvalidProtobuf,  # MODEL_PARSE_FAILED
    2003: InvalidProtobuf,  # MODEL_NOT_A_MODEL
    3001: NotImplemented,  # OP_UNSUPPORTED
    3002: NotImplemented,  # DTYPE_UNSUPPORTED
    4006: RuntimeException,  # OUT_OF_MEMORY
    4007: Fail,  # RUN_CANCELLED (ORT: Fail, "Exiting due to terminate flag being set to true")
    4008: Fail,  # RUN_DEADLINE_EXCEEDED
    6003: InvalidProtobuf,  # GBM_NOT_GBM
    6004: InvalidProtobuf,  # GBM_TRUNCATED
    6005: InvalidProtobuf,  # GBM_CHECKSUM_MISMATCH
    6006: Fail,  # GBM_VERSION_NEWER
    6007: Fail,  # GBM_ISA_MISSING
    6008: InvalidProtobuf,  # GBM_INVALID
    6009: InvalidGraph,  # GBM_UNSUPPORTED
    7006: EPFail,  # DEVICE_NOT_FOUND
    7007: InvalidArgument,  # API_INVALID_ARGUMENT
}
# By the thousands digit: 1 files, 2 import, 3 kernels, 4 running, 5 usage, 6 optimizer and
# .gbm (the rest: pass and engine names), 7 devices and pools, 8 serving, 9 internal.
_BY_RANGE = {1: Fail, 2: InvalidGraph, 3: RuntimeException, 4: InvalidArgument, 5: InvalidArgument,
             6: InvalidArgument, 7: RuntimeException, 8: Fail, 9: Fail}


def error_class(code):
    """The class an error of this catalogue code is raised as."""
    return _BY_CODE.get(code) or _BY_RANGE.get(code // 1000, Fail)


def _from_status(code, name, message, text, cause, fix):
    # Called by the C++ module (src/python/errors.cc) for every gearbox Status it raises.
    return error_class(code)(text, code, name, message, cause, fix)
