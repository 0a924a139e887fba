// A fairque pull worker in Node.js, on the client package of clients/node.
//
// The package leases tasks fairly (long polls that carry the previous results),
// runs each with the handler registered for its name, keeps its slots busy by
// leasing ahead, heartbeats, stops a canceled handler, rides out a restart of the
// service, and drains on SIGTERM or SIGINT. Each lease names the tasks this worker
// handles, so the server never hands it another name.
//
// Settings (environment):
//   FAIRQUE_API        the server, default http://127.0.0.1:8000
//   FAIRQUE_QUEUE      the queue, default "default"
//   FAIRQUE_TOKEN      a bearer token with the worker role (when the server has tokens)
//   WORKER_ID          default node-<pid>
//   MAX_TASKS          handlers at once (1-100), default 10
//   EXIT_WHEN_IDLE     exit after this many empty long polls in a row (default: never)
import { Worker } from "fairque";

// handlers by task name: the payload in, the result out (throw to fail); the second
// argument carries the task's W3C trace context: a handler that calls other services
// forwards it as their `traceparent` header, so their spans join the task's trace
const handlers = {
  square: (payload, { traceparent }) => ({ value: payload.n * payload.n, traceparent }),
  concat: (payload) => payload.parts.join(""),
  explode: (payload) => {
    throw new Error(`cannot handle ${JSON.stringify(payload)}`);
  },
};

const worker = new Worker({
  api: process.env.FAIRQUE_API ?? "http://127.0.0.1:8000",
  queue: process.env.FAIRQUE_QUEUE ?? "default",
  token: process.env.FAIRQUE_TOKEN,
  workerId: process.env.WORKER_ID ?? `node-${process.pid}`,
  concurrency: Number(process.env.MAX_TASKS ?? 10),
  stopWhenIdle: Number(process.env.EXIT_WHEN_IDLE ?? 0),
  handlers,
});
const stats = await worker.run();
console.log(JSON.stringify({ worker_id: worker.workerId, ...stats }));
