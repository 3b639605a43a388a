// .npy files <-> onnxruntime-node Tensors, for bench/ort_runner.js and the oracle suite
// (tests/conformance/oracle/ort_expected.js). The header is read by its three keys; C-order
// only. onnxruntime-node is resolved from NODE_PATH by the caller.
'use strict';
const fs = require('fs');
const ort = require('onnxruntime-node');

// descr -> [ORT type, typed array, bytes per element]
const NPY_TYPES = {
  '<f4': ['float32', Float32Array, 4],
  '<f8': ['float64', Float64Array, 8],
  // float16 tensors take their raw bits as a Uint16Array (node 20 has no Float16Array).
  '<f2': ['float16', Uint16Array, 2],
  '<i8': ['int64', BigInt64Array, 8],
  '<i4': ['int32', Int32Array, 4],
  '|u1': ['uint8', Uint8Array, 1],
  '|i1': ['int8', Int8Array, 1],
  '|b1': ['bool', Uint8Array, 1],
};
const DESCR_OF = Object.fromEntries(Object.entries(NPY_TYPES).map(([descr, t]) => [t[0], descr]));

function readNpy(file) {
  const buf = fs.readFileSync(file);
  if (buf.toString('latin1', 0, 6) !== '\x93NUMPY') throw new Error(`${file}: not a .npy file`);
  const major = buf[6];
  const headerLen = major === 1 ? buf.readUInt16LE(8) : buf.readUInt32LE(8);
  const start = (major === 1 ? 10 : 12) + headerLen;
  const header = buf.toString('latin1', major === 1 ? 10 : 12, start);
  const descr = /'descr':\s*'([^']+)'/.exec(header);
  const fortran = /'fortran_order':\s*(True|False)/.exec(header);
  const shape = /'shape':\s*\(([^)]*)\)/.exec(header);
  if (!descr || !fortran || !shape) throw new Error(`${file}: malformed .npy header ${header}`);
  if (fortran[1] === 'True') throw new Error(`${file}: Fortran-order arrays are not supported`);
  const t = NPY_TYPES[descr[1]];
  if (!t) throw new Error(`${file}: dtype ${descr[1]} not supported (${Object.keys(NPY_TYPES).join(', ')})`);
  const dims = shape[1].split(',').map((s) => s.trim()).filter((s) => s.length).map(Number);
  const n = dims.reduce((a, b) => a * b, 1);
  if (buf.length - start < n * t[2]) throw new Error(`${file}: data shorter than its shape`);
  const bytes = new Uint8Array(buf.buffer.slice(buf.byteOffset + start, buf.byteOffset + start + n * t[2]));
  // bool tensors take a Uint8Array of 0/1, as .npy stores them.
  return new ort.Tensor(t[0], new t[1](bytes.buffer), dims);
}

function writeNpy(file, tensor) {
  const descr = DESCR_OF[tensor.type];
  if (!descr) throw new Error(`output type ${tensor.type} cannot be written as .npy here`);
  let header = `{'descr': '${descr}', 'fortran_order': False, 'shape': (${tensor.dims.join(', ')}${tensor.dims.length === 1 ? ',' : ''}), }`;
  const total = 10 + header.length + 1;
  header += ' '.repeat((64 - (total % 64)) % 64) + '\n';
  const pre = Buffer.alloc(10);
  pre.write('\x93NUMPY', 0, 'latin1');
  pre[6] = 1;
  pre[7] = 0;
  pre.writeUInt16LE(header.length, 8);
  const data = tensor.type === 'bool' ? Buffer.from(Uint8Array.from(tensor.data, (v) => (v ? 1 : 0)))
                                      : Buffer.from(tensor.data.buffer, tensor.data.byteOffset, tensor.data.byteLength);
  fs.writeFileSync(file, Buffer.concat([pre, Buffer.from(header, 'latin1'), data]));
}

module.exports = { readNpy, writeNpy };
