// ONNX Runtime as the oracle (issue 25 item 2): for every case folder make_cases.py wrote,
// runs model.onnx on inputs/*.npy with onnxruntime-node (CPU, all graph optimizations off, so
// each op is ORT's own kernel) and writes expected/<output>.npy, or ort_refused.txt with
// ORT's message when ORT cannot load or run the case (such a case is listed, not counted).
// Cases that already have either are skipped, so a rerun after a crash goes on from there.
// Prints one line per refused case and a summary.
//
//   NODE_PATH=.../node_modules node ort_expected.js CASES_DIR
'use strict';
const fs = require('fs');
const path = require('path');
const ort = require('onnxruntime-node');
const { readNpy, writeNpy } = require(path.join(__dirname, '..', '..', '..', 'bench', 'npy.js'));

async function runCase(dir) {
  const meta = JSON.parse(fs.readFileSync(path.join(dir, 'case.json'), 'utf8'));
  const feeds = {};
  for (const name of meta.inputs) feeds[name] = readNpy(path.join(dir, 'inputs', name + '.npy'));
  const session = await ort.InferenceSession.create(path.join(dir, 'model.onnx'), {
    intraOpNumThreads: 1, interOpNumThreads: 1, graphOptimizationLevel: 'disabled', logSeverityLevel: 3,
  });
  const out = await session.run(feeds);
  const expected = path.join(dir, 'expected');
  fs.mkdirSync(expected, { recursive: true });
  for (const name of meta.outputs) writeNpy(path.join(expected, name + '.npy'), out[name]);
}

async function main() {
  const root = process.argv[2];
  if (!root) throw new Error('usage: ort_expected.js CASES_DIR');
  let ran = 0;
  let refused = 0;
  for (const name of fs.readdirSync(root).sort()) {
    const dir = path.join(root, name);
    if (!fs.existsSync(path.join(dir, 'case.json'))) continue;
    if (fs.existsSync(path.join(dir, 'expected')) || fs.existsSync(path.join(dir, 'ort_refused.txt'))) continue;
    // The marker says which case was running if ORT takes the process down (it segfaults on
    // some contrib-op inputs); check_oracle.py then records that case as refused and reruns.
    const marker = path.join(dir, 'ort_running');
    fs.writeFileSync(marker, '');
    try {
      await runCase(dir);
      ran++;
    } catch (e) {
      refused++;
      fs.writeFileSync(path.join(dir, 'ort_refused.txt'), String(e.message || e).split('\n')[0] + '\n');
      console.log(`ORT refused ${name}: ${String(e.message || e).split('\n')[0]}`);
    }
    fs.unlinkSync(marker);
  }
  console.log(JSON.stringify({ ort_version: ort.env.versions ? ort.env.versions.common : null, ran, refused }));
}

main().catch((e) => {
  console.error(`ort_expected: ${e.stack || e}`);
  process.exit(1);
});
