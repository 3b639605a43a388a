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
const { readNpy, writeNpy } = require('./npy.js');

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
