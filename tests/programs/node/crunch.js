// A small hot loop nobody tuned, for `diagnose` on Node (tests/diagnose_coverage.rs): V8
// compiles crunch() and runs it until each thread has used 2 s of CPU. `node crunch.js N`
// runs it in N worker threads (worker_threads) instead of the main thread.
const { Worker, isMainThread, workerData } = require('worker_threads');

function crunch(n) {
  let s = 0;
  for (let i = 0; i < n; i++) {
    s = (s * 31 + i) % 1000003;
  }
  return s;
}

function run() {
  const start = process.hrtime.bigint();
  let t = 0;
  // The thread's own CPU time is not in Node's API; wall time bounded by 20 s keeps a busy
  // machine from stretching the run forever, 2 s of the process's CPU per thread ends it.
  while (process.cpuUsage().user < 2e6 * threads && process.hrtime.bigint() - start < 20e9) {
    t += crunch(100000);
  }
  return t;
}

const threads = isMainThread ? Math.max(1, Number(process.argv[2] || 0)) : workerData;
if (!isMainThread) {
  run();
} else if (Number(process.argv[2] || 0) > 0) {
  for (let i = 0; i < threads; i++) new Worker(__filename, { workerData: threads });
} else {
  console.log(run());
}
