// fairque for Node.js: a producer client and a pull worker for `fairque serve`'s HTTP
// API, in MessagePack. See README.md; the types are in index.d.ts.
import { randomUUID } from "node:crypto";
import { decode, encode } from "@msgpack/msgpack";

const MSGPACK = "application/msgpack";
// statuses worth another try: the server or the queue server is away, or busy
const TRANSIENT = new Set([408, 429, 502, 503, 504]);

/** An answer the service gave with a problem document (RFC 9457). */
export class FairqueError extends Error {
  constructor(status, problem) {
    super(`HTTP ${status}: ${problem?.detail ?? problem?.title ?? "error"}`);
    this.name = "FairqueError";
    this.status = status;
    this.problem = problem ?? {};
    this.type = String(this.problem.type ?? "").replace(/^urn:fairque:problem:/, "");
  }
}

const sleep = (ms, signal) =>
  new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const timer = setTimeout(resolve, ms);
    signal?.addEventListener("abort", () => {
      clearTimeout(timer);
      resolve();
    }, { once: true });
  });

/** Exponential backoff with full jitter: the n-th wait (ms) between min and max. */
export function backoffMs(attempt, minMs = 100, maxMs = 5000) {
  const cap = Math.min(maxMs, minMs * 2 ** attempt);
  return minMs + Math.random() * (cap - minMs);
}

/** The HTTP transport both the Client and the Worker use: one queue, MessagePack,
 * a bearer token, and retries (with backoff) of transient failures for calls that are
 * safe to resend. */
class Transport {
  constructor({ api = "http://127.0.0.1:8000", queue = "default", token, fetch: fetchImpl,
    log = () => {}, minBackoffMs = 100, maxBackoffMs = 5000 } = {}) {
    this.base = `${api.replace(/\/$/, "")}/v1/queues/${encodeURIComponent(queue)}`;
    this.token = token;
    this.fetch = fetchImpl ?? globalThis.fetch;
    this.log = log;
    this.minBackoffMs = minBackoffMs;
    this.maxBackoffMs = maxBackoffMs;
  }

  /** One request; the decoded body and status. Throws FairqueError for a problem
   * answer, and the fetch error (a TypeError) when the server cannot be reached. */
  async once(method, path, body, signal) {
    const headers = { Accept: MSGPACK };
    if (this.token) headers.Authorization = `Bearer ${this.token}`;
    if (body !== undefined) headers["Content-Type"] = MSGPACK;
    const response = await this.fetch(this.base + path, {
      method, headers, body: body === undefined ? undefined : encode(body), signal,
    });
    const bytes = new Uint8Array(await response.arrayBuffer());
    const data = bytes.length ? decode(bytes) : null;
    if (!response.ok) {
      const error = new FairqueError(response.status, data);
      error.retryAfter = Number(response.headers.get("retry-after") ?? 0);
      throw error;
    }
    return { status: response.status, data };
  }

  /** ``once`` until it is answered, waiting out transient failures (503, connection
   * errors...): only for requests that are safe to resend. Gives up when `signal`
   * aborts (the last error is thrown then). */
  async call(method, path, body, { signal, retry = true } = {}) {
    for (let attempt = 0; ; attempt += 1) {
      try {
        return await this.once(method, path, body, signal);
      } catch (error) {
        const transient = error instanceof FairqueError ? TRANSIENT.has(error.status) : true;
        if (!retry || !transient || signal?.aborted) throw error;
        const wait = Math.max(backoffMs(attempt, this.minBackoffMs, this.maxBackoffMs),
          (error.retryAfter ?? 0) * 1000);
        this.log(`${method} ${path}: ${error.message ?? error}; again in ${Math.round(wait)} ms`);
        await sleep(wait, signal);
        if (signal?.aborted) throw error;
      }
    }
  }
}

/** A producer: push, read, wait for and cancel tasks of one queue. */
export class Client {
  constructor(options = {}) {
    this.transport = new Transport(options);
  }

  /** Push one task ({name, user_id, payload, ...}); a task without an id gets one
   * here, so that a push resent after a lost answer makes no second task. */
  async push(task) {
    const body = { ...task, task_id: task.task_id ?? randomUUID() };
    return (await this.transport.call("POST", "/tasks", body)).data;
  }

  /** Push several tasks at once (all or nothing). */
  async pushMany(tasks) {
    const body = { tasks: tasks.map((t) => ({ ...t, task_id: t.task_id ?? randomUUID() })) };
    return (await this.transport.call("POST", "/tasks", body)).data.tasks;
  }

  /** A task, or null when the queue holds none with this id. */
  async get(taskId) {
    try {
      return (await this.transport.call("GET", `/tasks/${encodeURIComponent(taskId)}`)).data;
    } catch (error) {
      if (error instanceof FairqueError && error.status === 404) return null;
      throw error;
    }
  }

  /** A task's outcome: {type: "success", result} or {type: "failure", ...}, {state}
   * while it has not ended (after waiting up to waitSeconds), or null (unknown,
   * expired, consumed). */
  async result(taskId, { waitSeconds = 0, consume = false } = {}) {
    const query = `?wait_seconds=${waitSeconds}&consume=${consume}`;
    // a consuming read is not resent: a lost answer would have consumed the result
    const { data } = await this.transport.call(
      "GET", `/tasks/${encodeURIComponent(taskId)}/result${query}`, undefined,
      { retry: !consume },
    );
    return data;
  }

  /** Cancel a task that has not ended: the task, or null when the queue holds none;
   * a FairqueError with type "already-ended" when it has ended. */
  async cancel(taskId) {
    try {
      return (await this.transport.call("DELETE", `/tasks/${encodeURIComponent(taskId)}`)).data;
    } catch (error) {
      if (error instanceof FairqueError && error.status === 404) return null;
      throw error;
    }
  }
}

/** A pull worker: leases tasks fairly, runs each with the handler for its name, and
 * reports its outcome with the handler's measured run. */
export class Worker {
  constructor({ handlers, concurrency = 10, ahead, workerId, leaseSeconds, waitSeconds = 5,
    heartbeatSeconds, graceSeconds = 30, signals = ["SIGTERM", "SIGINT"], stopWhenIdle = 0,
    ...options }) {
    if (!handlers || typeof handlers !== "object") throw new TypeError("handlers: an object of functions by task name");
    if (!Number.isInteger(concurrency) || concurrency < 1 || concurrency > 100) {
      throw new RangeError("concurrency: an integer from 1 to 100");
    }
    this.transport = new Transport(options);
    this.log = options.log ?? ((line) => console.error(`fairque worker: ${line}`));
    this.transport.log = this.log;
    this.handlers = handlers;
    this.names = Object.keys(handlers);
    this.concurrency = concurrency;
    // leased ahead of a free slot, so a slot that frees starts its next task at once
    // (twice the slots: a 1 ms task's slot stays busy through a lease's round trip)
    this.ahead = ahead ?? 2 * concurrency;
    if (this.concurrency + this.ahead > 100) this.ahead = 100 - this.concurrency;
    this.workerId = workerId ?? `node-${process.pid}-${randomUUID().slice(0, 8)}`;
    this.leaseSeconds = leaseSeconds;
    this.waitSeconds = waitSeconds;
    this.heartbeatSeconds = heartbeatSeconds;
    this.graceSeconds = graceSeconds;
    this.signals = signals;
    this.stopWhenIdle = stopWhenIdle;
    this.idlePolls = 0;
    this.ready = []; // leased, not started
    this.running = new Map(); // task_id -> {task, controller, timer}
    this.outbox = []; // result messages not yet sent
    this.stats = { done: 0, failed: 0, givenBack: 0, lost: 0, refused: 0 };
    this.stopping = false;
    this.stopper = new AbortController();
    this.wake = null;
  }

  /** Begin draining: lease nothing more, give back what has not started, let what
   * runs finish (within graceSeconds). */
  stop() {
    if (this.stopping) return;
    this.stopping = true;
    this.stopper.abort();
    this.poke();
  }

  // something happened (a task ended, a stop): wake the loop waiting for it, or let
  // its next wait return at once (an event while it was busy is not lost)
  poke() {
    const wake = this.wake;
    this.wake = null;
    if (wake) wake();
    else this.poked = true;
  }

  waitForEvent(ms) {
    if (this.poked) {
      this.poked = false;
      return Promise.resolve();
    }
    return new Promise((resolve) => {
      const timer = ms === undefined ? null : setTimeout(() => {
        this.wake = null;
        resolve();
      }, ms);
      this.wake = () => {
        if (timer) clearTimeout(timer);
        resolve();
      };
    });
  }

  /** Run until stop() (or a signal in `signals`); resolves once drained. */
  async run() {
    const onSignal = () => this.stop();
    for (const signal of this.signals) process.on(signal, onSignal);
    const sweep = setInterval(() => this.keepAhead(), 250);
    try {
      await this.loop();
      await this.drain();
    } finally {
      clearInterval(sweep);
      for (const signal of this.signals) process.off(signal, onSignal);
    }
    return this.stats;
  }

  /** Extend the leases of tasks leased ahead that have waited a third of their lease
   * (long tasks ahead of them): a task never starts on a lease that ran out; one
   * canceled or lost meanwhile is dropped. */
  async keepAhead() {
    const now = Date.now();
    for (const task of [...this.ready]) {
      if (task.extending || now - task.leasedAt < task.leaseMs / 3) continue;
      task.extending = true;
      try {
        const { data } = await this.transport.once(
          "POST", `/tasks/${encodeURIComponent(task.task_id)}/extend`, { lease_token: task.lease_token },
        );
        task.leasedAt = Date.now();
        task.leaseMs = Date.parse(data.lease_expires_at) - task.leasedAt;
        if (data.cancel_requested) this.drop(task);
      } catch (error) {
        if (error instanceof FairqueError && (error.status === 409 || error.status === 404)) this.drop(task);
      } finally {
        task.extending = false;
      }
    }
  }

  drop(task) {
    const at = this.ready.indexOf(task);
    if (at >= 0) {
      this.ready.splice(at, 1);
      this.stats.lost += 1;
    }
  }

  async loop() {
    while (!this.stopping) {
      this.startReady();
      const held = this.running.size + this.ready.length;
      const room = this.concurrency + this.ahead - held;
      if (room <= 0) {
        // every slot busy and the tasks ahead in hand: send what ended, or wait for it
        if (this.outbox.length > 0) await this.flush();
        else await this.waitForEvent();
        continue;
      }
      // a long poll (the server answers as soon as work is ready) that carries the
      // result messages in hand, recorded before it waits; those that come while it
      // waits go on their own (flushSoon)
      const outcomes = this.outbox.splice(0, 100);
      let answer;
      this.polling = true;
      try {
        answer = await this.transport.call("POST", "/leases", {
          worker_id: this.workerId,
          max_tasks: this.concurrency + this.ahead, // leases held at most, ahead included
          wait_seconds: this.waitSeconds,
          names: this.names,
          lease_seconds: this.leaseSeconds ?? null,
          request_id: randomUUID(), // a resend of this request gets its leases again
          outcomes,
        }, { signal: this.stopper.signal });
      } catch (error) {
        if (this.stopping) {
          this.outbox.unshift(...outcomes); // (a resend of them is answered the same)
          break;
        }
        throw error;
      } finally {
        this.polling = false;
      }
      this.record(answer.data.results ?? []);
      const empty = answer.data.tasks.length === 0 && this.running.size + this.ready.length === 0;
      this.idlePolls = empty ? this.idlePolls + 1 : 0;
      if (this.stopWhenIdle > 0 && this.idlePolls >= this.stopWhenIdle) this.stop();
      const now = Date.now();
      for (const task of answer.data.tasks) {
        this.ready.push({ ...task, leasedAt: now, leaseMs: Date.parse(task.lease_expires_at) - now });
      }
      this.startReady();
    }
  }

  /** Send the result messages in hand now, unless a request is already on its way. */
  flushSoon() {
    if (this.flushing || !this.polling || this.outbox.length === 0) return;
    this.flushing = true;
    this.flush()
      .catch((error) => this.log(`result messages: ${error.message ?? error}`))
      .finally(() => {
        this.flushing = false;
        this.flushSoon();
      });
  }

  startReady() {
    while (this.ready.length > 0 && this.running.size < this.concurrency && !this.stopping) {
      this.start(this.ready.shift());
    }
  }

  start(task) {
    const controller = new AbortController();
    const entry = { task, controller, began: process.hrtime.bigint(), lost: false };
    this.running.set(task.task_id, entry);
    const leaseMs = Math.max(1000, Date.parse(task.lease_expires_at) - Date.now());
    const beatMs = (this.heartbeatSeconds ?? Math.max(0.2, leaseMs / 3000)) * 1000;
    entry.timer = setInterval(() => this.heartbeat(entry), beatMs);
    this.execute(entry).finally(() => {
      clearInterval(entry.timer);
      this.running.delete(task.task_id);
      this.startReady(); // a task leased ahead takes the slot at once
      this.flushSoon();
      this.poke();
    });
  }

  ran(entry) {
    return Number(process.hrtime.bigint() - entry.began) / 1e9;
  }

  async heartbeat(entry) {
    if (entry.beating || entry.lost) return;
    entry.beating = true;
    try {
      const { data } = await this.transport.once("POST", `/tasks/${encodeURIComponent(entry.task.task_id)}/extend`, {
        lease_token: entry.task.lease_token, run_seconds: this.ran(entry), ...entry.progress,
      });
      if (data.cancel_requested) {
        entry.lost = true; // canceled: its lease ended with it, nothing to report
        entry.controller.abort(new Error("the task was canceled"));
      }
    } catch (error) {
      if (error instanceof FairqueError && (error.status === 409 || error.status === 404)) {
        entry.lost = true; // another worker holds it now: stop, report nothing
        entry.controller.abort(new Error("the lease was lost"));
      }
      // a transient failure: the next beat tries again
    } finally {
      entry.beating = false;
    }
  }

  async execute(entry) {
    const { task } = entry;
    const base = { task_id: task.task_id, lease_token: task.lease_token };
    const handler = this.handlers[task.name];
    let outcome;
    if (handler === undefined) {
      outcome = { ...base, type: "failure", should_retry: false, message: `no handler for ${task.name}` };
    } else {
      try {
        const result = await handler(task.payload, {
          task, signal: entry.controller.signal, traceparent: task.traceparent ?? null,
          progress: (fraction, message = "") => {
            entry.progress = { progress: fraction, progress_message: message };
          },
        });
        const run_seconds = this.ran(entry);
        try {
          encode(result); // a result MessagePack cannot carry fails here, not on the wire
          outcome = { ...base, type: "success", result: result ?? null, run_seconds };
        } catch (error) {
          outcome = { ...base, type: "failure", should_retry: false, run_seconds,
            message: `result cannot be sent: ${error.message}` };
        }
      } catch (error) {
        outcome = { ...base, type: "failure", run_seconds: this.ran(entry),
          reason: "other", should_retry: true, // the task's retry policy decides
          error: { name: error?.name ?? "Error" }, message: String(error?.message ?? error) };
      }
    }
    if (entry.lost) {
      this.stats.lost += 1;
      return;
    }
    outcome.finished_at = new Date().toISOString();
    this.outbox.push(outcome);
  }

  record(results) {
    for (const item of results) {
      if (item.status === 200) {
        if (item.state === "FINISHED") this.stats.done += 1;
        else if (item.state === "QUEUED") this.stats.givenBack += 1;
        else this.stats.failed += 1;
      } else if (item.problem?.type?.endsWith("result-refused")) {
        this.stats.refused += 1; // the server failed the task with the refusal
        this.log(`task ${item.task_id}: ${item.problem.detail}`);
      } else {
        this.stats.lost += 1;
        this.log(`task ${item.task_id}: ${item.problem?.detail ?? item.status}`);
      }
    }
  }

  /** Send the result messages in hand (resent until answered, or `signal` aborts). */
  async flush(signal) {
    while (this.outbox.length > 0) {
      const outcomes = this.outbox.splice(0, 100);
      try {
        const { data } = await this.transport.call("POST", "/outcomes", { outcomes }, { signal });
        this.record(data.results);
      } catch (error) {
        if (error instanceof FairqueError && !TRANSIENT.has(error.status)) {
          // refused whole (not per item): sending it again would be refused again; the
          // tasks' leases expire and they run again
          this.stats.lost += outcomes.length;
          this.log(`${outcomes.length} result message(s) refused: ${error.message}`);
          continue;
        }
        this.outbox.unshift(...outcomes);
        throw error;
      }
    }
  }

  async drain() {
    for (const task of this.ready.splice(0)) {
      this.outbox.push({ type: "requeue", task_id: task.task_id, lease_token: task.lease_token });
    }
    const deadline = Date.now() + this.graceSeconds * 1000;
    const grace = AbortSignal.timeout(this.graceSeconds * 1000);
    while (this.running.size > 0 && Date.now() < deadline) {
      await this.flush(grace).catch(() => {}); // (again after the next task ends)
      await this.waitForEvent(Math.max(1, deadline - Date.now()));
    }
    for (const entry of this.running.values()) {
      // past the grace: stopped, and given back for another worker to run again
      entry.lost = true;
      entry.controller.abort(new Error("the worker stopped"));
      this.outbox.push({ type: "requeue", task_id: entry.task.task_id, lease_token: entry.task.lease_token });
    }
    // the last word, within a few seconds more: what is not delivered by then waits for
    // its lease to expire (and is run again)
    await this.flush(AbortSignal.timeout(5000)).catch((error) => {
      this.log(`${this.outbox.length} result message(s) not delivered: ${error.message ?? error}`);
    });
  }
}
