"""The ONNX Runtime-compatible surface: ``import gearbox as onnxruntime`` runs code written for
ONNX Runtime's Python API (the common calls: InferenceSession, run, get_inputs/get_outputs,
SessionOptions, get_available_providers, its exception classes).

What differs, on purpose or for now, is listed in docs/python.md; in short: gearbox has one
optimizer pipeline (every graph_optimization_level but ORT_DISABLE_ALL turns it on), one
provider (CPUExecutionProvider; others are warned about and skipped, as ONNX Runtime does),
and options ONNX Runtime has that gearbox does not use are kept, so scripts that set them run.
"""
import enum
import json
import os
import time
import warnings

from gearbox import _C

_PROVIDERS = ["CPUExecutionProvider"]


def get_available_providers():
    """The execution providers this build has: gearbox's CPU engines serve
    'CPUExecutionProvider'."""
    return list(_PROVIDERS)


def get_all_providers():
    return list(_PROVIDERS)


def get_device():
    return "CPU"


class GraphOptimizationLevel(enum.IntEnum):
    ORT_DISABLE_ALL = 0
    ORT_ENABLE_BASIC = 1
    ORT_ENABLE_EXTENDED = 2
    ORT_ENABLE_ALL = 99


class ExecutionMode(enum.IntEnum):
    ORT_SEQUENTIAL = 0
    ORT_PARALLEL = 1


class SessionOptions:
    """ONNX Runtime's SessionOptions. Used by gearbox: intra_op_num_threads (0: all cores, or
    GEARBOX_NUM_THREADS), graph_optimization_level (ORT_DISABLE_ALL turns the optimizer off, any
    other level runs gearbox's whole pipeline), enable_profiling and profile_file_prefix
    (end_profiling() writes a Chrome trace). The others are accepted and have no effect."""

    __slots__ = ("intra_op_num_threads", "inter_op_num_threads", "graph_optimization_level",
                 "enable_profiling", "profile_file_prefix", "log_severity_level", "log_verbosity_level",
                 "logid", "execution_mode", "execution_order", "optimized_model_filepath",
                 "enable_cpu_mem_arena", "enable_mem_pattern", "enable_mem_reuse",
                 "use_deterministic_compute", "_config")

    def __init__(self):
        self.intra_op_num_threads = 0
        self.inter_op_num_threads = 0
        self.graph_optimization_level = GraphOptimizationLevel.ORT_ENABLE_ALL
        self.enable_profiling = False
        self.profile_file_prefix = "onnxruntime_profile_"
        self.log_severity_level = 2
        self.log_verbosity_level = 0
        self.logid = ""
        self.execution_mode = ExecutionMode.ORT_SEQUENTIAL
        self.execution_order = 0
        self.optimized_model_filepath = ""
        self.enable_cpu_mem_arena = True
        self.enable_mem_pattern = True
        self.enable_mem_reuse = True
        self.use_deterministic_compute = False
        self._config = {}

    def add_session_config_entry(self, key, value):
        self._config[str(key)] = str(value)

    def get_session_config_entry(self, key):
        return self._config[key]


class RunOptions:
    """ONNX Runtime's RunOptions, accepted by run(). ``terminate = True`` -- from any thread, while
    runs given these options are in flight -- stops them with RUN_CANCELLED (raised as Fail), as
    ORT's does; it stays set until set back to False. gearbox adds ``timeout``: seconds each run
    may take (0: no limit) before it stops with RUN_DEADLINE_EXCEEDED. The logging fields are
    accepted and not used."""

    __slots__ = ("log_severity_level", "log_verbosity_level", "logid", "run_tag",
                 "only_execute_path_to_fetches", "_control")

    def __init__(self):
        self.log_severity_level = 2
        self.log_verbosity_level = 0
        self.logid = ""
        self.run_tag = ""
        self.only_execute_path_to_fetches = False
        self._control = _C._RunControl()

    @property
    def terminate(self):
        return self._control.terminate

    @terminate.setter
    def terminate(self, value):
        self._control.terminate = bool(value)

    @property
    def timeout(self):
        return self._control.timeout

    @timeout.setter
    def timeout(self, seconds):
        self._control.timeout = float(seconds)


class ModelMetadata:
    def __init__(self, producer_name):
        self.producer_name = producer_name
        self.graph_name = ""
        self.graph_description = ""
        self.domain = ""
        self.description = ""
        self.version = 0
        self.custom_metadata_map = {}


def _check_providers(providers):
    """The providers this session uses; unknown ones are warned about and skipped, as newer
    ONNX Runtime versions do."""
    if providers is None:
        return list(_PROVIDERS)
    used = []
    for p in providers:
        name = p[0] if isinstance(p, tuple) else p
        if name in _PROVIDERS:
            if name not in used:
                used.append(name)
        else:
            warnings.warn(f"Specified provider '{name}' is not in available provider names."
                          f"Available providers: '{', '.join(_PROVIDERS)}'")
    return used or list(_PROVIDERS)


class InferenceSession:
    """ONNX Runtime's InferenceSession on gearbox's runtime."""

    def __init__(self, path_or_bytes, sess_options=None, providers=None, provider_options=None, **kwargs):
        if isinstance(path_or_bytes, (str, os.PathLike)):
            model = os.fspath(path_or_bytes)
        elif isinstance(path_or_bytes, (bytes, bytearray, memoryview)):
            model = path_or_bytes
        else:
            raise TypeError(f"Unable to load from type '{type(path_or_bytes)}'")
        self._sess_options = sess_options if sess_options is not None else SessionOptions()
        self._providers = _check_providers(providers)
        o = self._sess_options
        self._sess = _C.Session(model, threads=int(o.intra_op_num_threads),
                                optimize=int(o.graph_optimization_level) != GraphOptimizationLevel.ORT_DISABLE_ALL,
                                profiling=bool(o.enable_profiling))
        self._inputs_meta = self._sess.inputs
        self._outputs_meta = self._sess.outputs

    def get_inputs(self):
        return self._inputs_meta

    def get_outputs(self):
        return self._outputs_meta

    def get_overridable_initializers(self):
        return []

    def get_providers(self):
        return list(self._providers)

    def get_provider_options(self):
        return {p: {} for p in self._providers}

    def get_session_options(self):
        return self._sess_options

    def get_modelmeta(self):
        return ModelMetadata(self._sess._producer_name)

    def set_providers(self, providers=None, provider_options=None):
        self._providers = _check_providers(providers)

    def disable_fallback(self):
        pass

    def enable_fallback(self):
        pass

    def run(self, output_names, input_feed, run_options=None):
        """Runs the model: a list of arrays, one per name in output_names (all outputs when it is
        None or empty)."""
        missing = [i.name for i in self._inputs_meta if i.name not in input_feed and not i.type.startswith("optional")]
        if missing:
            raise ValueError(f"Required inputs ({missing}) are missing from input feed ({list(input_feed)}).")
        control = run_options._control if run_options is not None else None
        return self._sess._run_list(output_names, input_feed, control)

    def end_profiling(self):
        """Writes the profiled runs (enable_profiling) as a Chrome trace; returns its file name.
        The file is a JSON array of trace events, one per line, as ONNX Runtime writes it (gearbox
        profile's trace.json holds the same events under "traceEvents")."""
        if not self._sess_options.enable_profiling:
            return ""
        stamp = time.strftime("%Y-%m-%d_%H-%M-%S")
        path = self._sess._end_profiling(f"{self._sess_options.profile_file_prefix}_{stamp}.json")
        if path:
            with open(path) as f:
                events = json.load(f)["traceEvents"]
            with open(path, "w") as f:
                f.write("[\n" + ",\n".join(json.dumps(e) for e in events) + "\n]\n")
        return path
