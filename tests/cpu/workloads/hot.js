// hot.js - Node.js workload for the perf-map test: most of its CPU time in
// the JIT-compiled function hotLoop. Runs process.argv[2] seconds.
'use strict';

function hotLoop(n) {
  let x = 0;
  for (let i = 0; i < n; i++) {
    x = (x * 1103515245 + 12345 + i) % 2147483647;
  }
  return x;
}

const end = Date.now() + 1000 * Number(process.argv[2] || 5);
let sink = 0;
while (Date.now() < end) {
  sink ^= hotLoop(200000);
}
console.log(sink === 0.5 ? '' : 'done');
