// ONNX Runtime side of bench/ort_compare.py: the same protocol as `gearbox bench --rounds-stdin`.
//
//   node bench/ort_runner.js MODEL.onnx THREADS OUT_DIR NAME=FILE.npy...
//
// Loads the model (intra-op THREADS, inter-op 1, all graph optimizations), reads the inputs
// from .npy (float32, float16, int64, int32, bool), runs once, writes each output as OUT_DIR/<name>.npy,
// prints one JSON line {"ready": true, "load_ms", "first_run_ms"}, then answers each stdin
// line "W N" (W untimed runs, N timed) with {"times_ms": [...]} until EOF. onnxruntime-node
// is resolved from NODE_PATH (the driver points it at bench/.ort/node_modules).
'use strict';
const fs = require('fs');
const path = require('path');
const readline = require('readline');
const ort = require('onnxruntime-node');

const NPY_TYPES = {
  '<f4': ['float32', Float32Array, 4],
  // float16 tensors take their raw bits as a Uint16Array (node 20 has no Float16Array).
  '<f2': ['float16', Uint16Array, 2],
  '<i8': ['int64', BigInt64Array, 8],
  '<i4': ['int32', Int32Array, 4],
  '|b1': ['bool', Uint8Array, 1],
};

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
  if (!t) throw new Error(`${file}: dtype ${descr[1]} not supported (float32, float16, int64, int32, bool)`);
  const dims = shape[1].split(',').map((s) => s.trim()).filter((s) => s.length).map(Number);
  const n = dims.reduce((a, b) => a * b, 1);
  if (buf.length - start < n * t[2]) throw new Error(`${file}: data shorter than its shape`);
  const bytes = new Uint8Array(buf.buffer.slice(buf.byteOffset + start, buf.byteOffset + start + n * t[2]));
  // bool tensors take a Uint8Array of 0/1, as .npy stores them.
  return new ort.Tensor(t[0], new t[1](bytes.buffer), dims);
}

function writeNpy(file, tensor) {
  const descr = { float32: '<f4', float16: '<f2', int64: '<i8', int32: '<i4', bool: '|b1', float64: '<f8' }[tensor.type];
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

function safeName(name) {
  let out = name.replace(/[^A-Za-z0-9._-]/g, '_');
  if (out === '' || out === '.' || out === '..') out = '_' + out;
  return out;
}

async function timed(session, feeds) {
  const t0 = process.hrtime.bigint();
  const out = await session.run(feeds);
  return [Number(process.hrtime.bigint() - t0) / 1e6, out];
}

async function main() {
  const [model, threadsArg, outDir, ...specs] = process.argv.slice(2);
  if (!model || !threadsArg || !outDir) throw new Error('usage: ort_runner.js MODEL THREADS OUT_DIR NAME=FILE.npy...');
  const feeds = {};
  for (const spec of specs) {
    const eq = spec.indexOf('=');
    feeds[spec.slice(0, eq)] = readNpy(spec.slice(eq + 1));
  }
  const t0 = process.hrtime.bigint();
  const options = {
    intraOpNumThreads: parseInt(threadsArg, 10), interOpNumThreads: 1, graphOptimizationLevel: 'all',
    executionMode: 'sequential',
  };
  // ORT_RUNNER_ALLOW_SPINNING=0: intra-op threads block instead of spinning when idle (ORT's
  // session.intra_op.allow_spinning; the driver's --spin off, the counterpart of
  // OMP_WAIT_POLICY=passive on the gearbox side).
  if (process.env.ORT_RUNNER_ALLOW_SPINNING !== undefined)
    options.extra = { session: { intra_op: { allow_spinning: process.env.ORT_RUNNER_ALLOW_SPINNING } } };
  const session = await ort.InferenceSession.create(model, options);
  const loadMs = Number(process.hrtime.bigint() - t0) / 1e6;
  const [firstMs, out] = await timed(session, feeds);
  fs.mkdirSync(outDir, { recursive: true });
  for (const name of session.outputNames) writeNpy(path.join(outDir, safeName(name) + '.npy'), out[name]);
  console.log(JSON.stringify({ ready: true, load_ms: loadMs, first_run_ms: firstMs, version: ort.env.versions ? ort.env.versions.node : null }));

  const rl = readline.createInterface({ input: process.stdin });
  for await (const line of rl) {
    if (!line.trim()) break;
    const [w, n] = line.trim().split(/\s+/).map(Number);
    const times = [];
    for (let i = 0; i < w + n; i++) {
      const [ms] = await timed(session, feeds);
      if (i >= w) times.push(ms);
    }
    console.log(JSON.stringify({ times_ms: times }));
  }
  rl.close();
}

main().catch((e) => {
  console.error(`ort_runner: ${e.stack || e}`);
  process.exit(1);
});
