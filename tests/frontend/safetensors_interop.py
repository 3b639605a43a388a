"""Checkpoint interchange with torch, for tests/frontend/checkpoint_test.cc (CheckpointTorch).

The safetensors layout is read and written here by hand with json and numpy (the safetensors
package is not a dependency), so the check does not trust a library's reading of our files.

  safetensors_interop.py write DIR    torch's MLP (seed 0) as DIR/torch_mlp.safetensors, its
                                      input x.npy, targets t.npy and output y.npy
  safetensors_interop.py verify DIR   DIR/gearbox.safetensors (that MLP after one SGD-momentum
                                      step in gearbox) against the same step in torch
"""
import json
import struct
import sys

import numpy as np
import torch

DTYPES = {"F32": np.float32, "F64": np.float64, "I64": np.int64}


# Unpadded (the safetensors package pads the header to 8 bytes): gearbox must not need alignment.
def write_safetensors(path, tensors, metadata):
    header, offset, blobs = {"__metadata__": metadata}, 0, []
    for name, array in tensors.items():
        array = np.ascontiguousarray(array)
        dtype = {np.dtype(v): k for k, v in DTYPES.items()}[array.dtype]
        header[name] = {"dtype": dtype, "shape": list(array.shape), "data_offsets": [offset, offset + array.nbytes]}
        blobs.append(array.astype(array.dtype.newbyteorder("<")).tobytes())
        offset += array.nbytes
    text = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def read_safetensors(path, aligned=True):
    data = open(path, "rb").read()
    (n,) = struct.unpack("<Q", data[:8])
    assert 8 + n <= len(data), "header length past the end"
    assert not aligned or (8 + n) % 8 == 0, "data not 8-byte aligned"
    header = json.loads(data[8:8 + n].decode("utf-8"))
    metadata = header.pop("__metadata__", {})
    body = data[8 + n:]
    ranges, tensors = [], {}
    for name, entry in header.items():
        assert set(entry) == {"dtype", "shape", "data_offsets"}, entry
        begin, end = entry["data_offsets"]
        dtype = np.dtype(DTYPES[entry["dtype"]]).newbyteorder("<")
        count = int(np.prod(entry["shape"], dtype=np.int64))
        assert end - begin == count * dtype.itemsize, name
        assert not aligned or begin % dtype.itemsize == 0, f"{name} misaligned"
        tensors[name] = np.frombuffer(body[begin:end], dtype=dtype).reshape(entry["shape"])
        ranges.append((begin, end))
    ranges.sort()
    position = 0
    for begin, end in ranges:
        assert begin == position, "gap or overlap"
        position = end
    assert position == len(body), "trailing bytes"
    return tensors, metadata


def torch_setup():
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(5, 6), torch.nn.ReLU(), torch.nn.Linear(6, 3))
    x = torch.randn(4, 5)
    t = torch.tensor([0, 1, 2, 1])
    return net, x, t


def main():
    mode, out = sys.argv[1], sys.argv[2]
    net, x, t = torch_setup()
    if mode == "write":
        state = {k: v.numpy() for k, v in net.state_dict().items()}
        write_safetensors(f"{out}/torch_mlp.safetensors", state, {"source": "torch " + torch.__version__})
        np.save(f"{out}/x.npy", x.numpy())
        np.save(f"{out}/t.npy", t.numpy())
        np.save(f"{out}/y.npy", net(x).detach().numpy())
        return 0
    tensors, metadata = read_safetensors(f"{out}/gearbox.safetensors")
    assert metadata.get("gearbox.format_version") == "1", metadata
    assert metadata.get("gearbox.optimizer") == "SGD", metadata
    assert metadata.get("note") == "from torch", metadata
    opt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
    loss = torch.nn.functional.cross_entropy(net(x), t)
    opt.zero_grad()
    loss.backward()
    opt.step()
    worst = 0.0
    for name, value in net.state_dict().items():
        worst = max(worst, float(np.abs(tensors[name] - value.numpy()).max()))
    torch_state = opt.state_dict()
    for i, p_state in torch_state["state"].items():
        got = tensors[f"optimizer.state.{i}.momentum_buffer"]
        worst = max(worst, float(np.abs(got - p_state["momentum_buffer"].numpy()).max()))
    group = torch_state["param_groups"][0]
    for key in ("lr", "momentum", "dampening", "weight_decay"):
        assert float(tensors[f"optimizer.param_groups.0.{key}"]) == group[key], key
    assert float(tensors["optimizer.param_groups.0.nesterov"]) == float(group["nesterov"])
    assert list(tensors["optimizer.param_groups.0.params"]) == group["params"], tensors["optimizer.param_groups.0.params"]
    expected = set(net.state_dict()) | {f"optimizer.state.{i}.momentum_buffer" for i in range(4)} | {
        f"optimizer.param_groups.0.{k}" for k in ("lr", "momentum", "dampening", "weight_decay", "nesterov", "params")}
    assert set(tensors) == expected, sorted(set(tensors) ^ expected)
    print(f"gearbox checkpoint vs torch: worst |difference| {worst:.3g} over {len(tensors)} tensors")
    assert worst < 1e-6, worst
    return 0


if __name__ == "__main__":
    sys.exit(main())
