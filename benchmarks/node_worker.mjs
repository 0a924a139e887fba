// The Node.js client's worker for benchmarks/node_worker.py: `work` tasks sleep the
// payload's `ms`; each handler's span (tenant, start, end in ms) goes to SPANS as a line.
import { appendFileSync } from "node:fs";
import { Worker } from "../clients/node/index.js";

const spans = process.env.SPANS;
const worker = new Worker({
  api: process.env.FAIRQUE_API,
  queue: process.env.FAIRQUE_QUEUE,
  concurrency: Number(process.env.CONCURRENCY ?? 4),
  ahead: process.env.AHEAD ? Number(process.env.AHEAD) : undefined,
  log: () => {},
  handlers: {
    work: async ({ ms }, { task }) => {
      const start = performance.timeOrigin + performance.now();
      await new Promise((resolve) => setTimeout(resolve, ms));
      const end = performance.timeOrigin + performance.now();
      appendFileSync(spans, `${JSON.stringify([task.user_id, start, end])}\n`);
      return null;
    },
  },
});
console.log(JSON.stringify(await worker.run()));
