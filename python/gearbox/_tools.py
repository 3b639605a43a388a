"""gearbox's tools from Python: compile, smi, doctor and explain. The first three run the CLI's
own commands in this process (the flags they are given are `gearbox`'s, docs/cli.md) and
return what those commands print as JSON."""
import json
import os
import tempfile

from gearbox import _C


def compile(model, output, *, input_shapes=None, disabled_passes=(), engine_overrides=(), fusion_switch=None,
            target="native"):
    """``gearbox compile MODEL -o OUTPUT``: writes the compiled model (.gbm) and returns the
    compile report (the optimizer's passes, the partition, file sizes) as a dict.

    input_shapes: {input name: dims} fixes symbolic dims (``--input-shape``)."""
    args = ["compile", os.fspath(model), "-o", os.fspath(output), "--target", target]
    if input_shapes:
        args += ["--input-shape", ";".join(f"{k}:{','.join(str(d) for d in v)}" for k, v in input_shapes.items())]
    for p in disabled_passes:
        args += ["--disable-pass", p]
    for e in engine_overrides:
        args += ["--engine", e]
    if fusion_switch is not None:
        args += ["--fusion-switch", os.fspath(fusion_switch)]
    with tempfile.TemporaryDirectory(prefix="gearbox-compile-") as tmp:
        report = os.path.join(tmp, "report.json")
        _C._cli(args + ["--report", report])
        with open(report) as f:
            return json.load(f)


def smi(calibrate=False):
    """``gearbox smi --json``: devices, capabilities, measured peaks, this process's memory pool,
    system memory and temperatures, as a dict."""
    _, out, _ = _C._cli(["smi", "--json"] + (["--calibrate"] if calibrate else []))
    return json.loads(out)


def doctor(model=None):
    """``gearbox doctor [MODEL] --json``: this machine, environment (this Python process's) and
    a model checked against what gearbox needs: {"checks": [{status, name, detail, fix}],
    "summary": {pass, warn, fail}}."""
    _, out, _ = _C._cli(["doctor"] + ([os.fspath(model)] if model is not None else []) + ["--json"])
    return json.loads(out)


def explain(code):
    """The catalogue entry of an error code (4002, "GBX-E4002", "INPUT_UNKNOWN" or a
    GearboxError): {code, name, summary, cause, fix}."""
    return _C.error_info(getattr(code, "code", code))
