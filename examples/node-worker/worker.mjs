// A fairque pull worker in Node.js, speaking the HTTP API in MessagePack.
//
// It leases tasks (a long poll: the server answers as soon as work is ready),
// runs each with the handler registered for its name, and sends the result
// messages back in one batch, each with the handler's measured run
// (`run_seconds`: a time-fair queue charges the tenant that run, not the trips
// to and from the server). A lease that was lost (409) is skipped: another
// worker owns the task now. Each lease names the tasks this worker handles, so
// the server never hands it another name (those wait for a worker that runs
// them). SIGTERM or SIGINT drains: no new lease, the tasks in hand are run and
// reported, then it exits.
//
// Settings (environment):
//   FAIRQUE_API        the server, default http://127.0.0.1:8000
//   FAIRQUE_QUEUE      the queue, default "default"
//   FAIRQUE_TOKEN      a bearer token with the worker role (when the server has tokens)
//   WORKER_ID          default node-<pid>
//   MAX_TASKS          tasks leased per request (1-100), default 10
//   EXIT_WHEN_IDLE     exit after this many empty long polls in a row (default: never)
import { decode, encode } from "@msgpack/msgpack";

const api = (process.env.FAIRQUE_API ?? "http://127.0.0.1:8000").replace(/\/$/, "");
const queue = encodeURIComponent(process.env.FAIRQUE_QUEUE ?? "default");
const token = process.env.FAIRQUE_TOKEN;
const workerId = process.env.WORKER_ID ?? `node-${process.pid}`;
const maxTasks = Number(process.env.MAX_TASKS ?? 10);
const exitWhenIdle = Number(process.env.EXIT_WHEN_IDLE ?? 0);
const MSGPACK = "application/msgpack";

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

async function call(path, body) {
  const headers = { "Content-Type": MSGPACK, Accept: MSGPACK };
  if (token) headers.Authorization = `Bearer ${token}`;
  const response = await fetch(`${api}/v1/queues/${queue}${path}`, {
    method: "POST",
    headers,
    body: encode(body),
  });
  const data = decode(new Uint8Array(await response.arrayBuffer()));
  if (!response.ok) {
    throw new Error(`${path}: HTTP ${response.status}: ${data.detail ?? JSON.stringify(data)}`);
  }
  return data;
}

function run(task) {
  const handler = handlers[task.name];
  const finishedAt = () => new Date().toISOString();
  if (handler === undefined) {
    return {
      type: "failure", task_id: task.task_id, lease_token: task.lease_token,
      reason: "other", should_retry: false, finished_at: finishedAt(),
      error: null, message: `no handler for ${task.name}`,
    };
  }
  const began = process.hrtime.bigint();
  const ran = () => Number(process.hrtime.bigint() - began) / 1e9;
  try {
    const result = handler(task.payload, { traceparent: task.traceparent ?? null });
    return {
      type: "success", task_id: task.task_id, lease_token: task.lease_token,
      finished_at: finishedAt(), run_seconds: ran(), result,
    };
  } catch (error) {
    return {
      type: "failure", task_id: task.task_id, lease_token: task.lease_token,
      reason: "other", should_retry: task.attempt <= 2, finished_at: finishedAt(),
      run_seconds: ran(), error: { name: error.name }, message: String(error.message),
    };
  }
}

let stopping = false;
for (const signal of ["SIGTERM", "SIGINT"]) {
  process.on(signal, () => {
    stopping = true;
  });
}

async function main() {
  let idle = 0;
  let done = 0;
  const names = Object.keys(handlers);
  while (!stopping) {
    const { tasks } = await call("/leases", {
      worker_id: workerId, max_tasks: maxTasks, wait_seconds: 2, names,
    });
    if (tasks.length === 0) {
      idle += 1;
      if (exitWhenIdle > 0 && idle >= exitWhenIdle) break;
      continue;
    }
    idle = 0;
    const { results } = await call("/outcomes", { outcomes: tasks.map(run) });
    for (const item of results) {
      if (item.status === 200) done += 1;
      else console.error(`task ${item.task_id}: ${item.problem?.detail}`);
    }
  }
  console.log(JSON.stringify({ worker_id: workerId, done }));
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
