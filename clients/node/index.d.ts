// Types of the fairque Node.js client (index.js).

/** Where the service is and how to reach it. */
export interface ConnectionOptions {
  /** The service, default http://127.0.0.1:8000. */
  api?: string;
  /** The queue, default "default". */
  queue?: string;
  /** A bearer token (producer role for a Client, worker role for a Worker). */
  token?: string;
  /** A fetch implementation (default: the global one). */
  fetch?: typeof fetch;
  /** Where retries and refusals are told (default: nothing for a Client, stderr for a Worker). */
  log?: (line: string) => void;
  /** Backoff between tries of a transient failure (503, a refused connection...), ms. */
  minBackoffMs?: number;
  maxBackoffMs?: number;
}

/** A task to push (the HTTP API's task body). */
export interface TaskIn {
  name: string;
  /** Its tenant; a token held to one tenant may leave it out. */
  user_id?: string;
  payload?: unknown;
  /** Made here when left out, so that a resent push makes no second task. */
  task_id?: string;
  priority?: 1 | 2 | 3 | 4 | 5 | "critical";
  delay_seconds?: number;
  depends_on?: string[];
  max_retries?: number;
  timeout_seconds?: number;
  keep_result?: boolean;
  result_ttl_seconds?: number;
  cost?: number;
  [field: string]: unknown;
}

/** A stored task as the API shows it. */
export interface Task {
  task_id: string;
  queue: string;
  user_id: string;
  name: string;
  payload: unknown;
  state: "SCHEDULED" | "DEFERRED" | "QUEUED" | "STARTED" | "FINISHED" | "FAILED" | "CANCELED";
  retry_count: number;
  max_retries: number;
  created_at: string;
  started_at: string | null;
  ended_at: string | null;
  depends_on: string[];
  [field: string]: unknown;
}

/** A task handed to a worker, with its lease. */
export interface LeasedTask extends Task {
  lease_token: string;
  lease_expires_at: string;
  /** 1 for the first run. */
  attempt: number;
  traceparent?: string | null;
}

export type Outcome =
  | { type: "success"; finished_at: string | null; result: unknown }
  | { type: "failure"; reason: string; message: string; error: unknown; finished_at: string | null }
  | { state: string };

/** An answer with a problem document (RFC 9457). */
export class FairqueError extends Error {
  status: number;
  problem: { type?: string; title?: string; detail?: string; [field: string]: unknown };
  /** The problem's kind: "lease-lost", "already-ended", "quota-exceeded"... */
  type: string;
  retryAfter?: number;
}

/** Exponential backoff with full jitter (ms). */
export function backoffMs(attempt: number, minMs?: number, maxMs?: number): number;

/** A producer: push, read, wait for and cancel tasks of one queue. */
export class Client {
  constructor(options?: ConnectionOptions);
  push(task: TaskIn): Promise<Task>;
  pushMany(tasks: TaskIn[]): Promise<Task[]>;
  /** null when the queue holds no such task. */
  get(taskId: string): Promise<Task | null>;
  /** The outcome, {state} while pending, or null (unknown, expired, consumed). */
  result(taskId: string, options?: { waitSeconds?: number; consume?: boolean }): Promise<Outcome | null>;
  /** The canceled task, or null when unknown; FairqueError "already-ended" when it ended. */
  cancel(taskId: string): Promise<Task | null>;
}

/** What a handler gets beside the payload. */
export interface HandlerContext {
  task: LeasedTask;
  /** Aborted when the task is canceled, its lease lost, or the worker's grace ends. */
  signal: AbortSignal;
  /** The task's W3C trace context, to forward as `traceparent`. */
  traceparent: string | null;
  /** How far it got (0 to 1): sent with the next heartbeat. */
  progress(fraction: number, message?: string): void;
}

export type Handler = (payload: any, context: HandlerContext) => unknown | Promise<unknown>;

export interface WorkerOptions extends ConnectionOptions {
  /** Handlers by task name; the worker leases only these names. */
  handlers: Record<string, Handler>;
  /** Handlers running at once (1-100), default 10. */
  concurrency?: number;
  /** Tasks leased ahead of a free slot, default twice the concurrency (100 leases at most). */
  ahead?: number;
  workerId?: string;
  /** A lease's length (default: the queue's). */
  leaseSeconds?: number;
  /** A lease request's long poll, default 5 s. */
  waitSeconds?: number;
  /** Heartbeats (extend + cancel check) this often, default a third of the lease. */
  heartbeatSeconds?: number;
  /** How long a stop waits for running handlers, default 30 s. */
  graceSeconds?: number;
  /** Stop (drain) after this many lease requests in a row found nothing while nothing
   * ran: a worker for a batch that ends; 0 (the default) never. */
  stopWhenIdle?: number;
  /** Signals that stop it (drain), default SIGTERM and SIGINT; [] for none. */
  signals?: string[];
}

export interface WorkerStats {
  done: number;
  failed: number;
  givenBack: number;
  lost: number;
  refused: number;
}

/** A pull worker. */
export class Worker {
  constructor(options: WorkerOptions);
  /** Runs until stop() or a signal; resolves once drained. */
  run(): Promise<WorkerStats>;
  /** Drain: lease nothing more, give back what has not started, let what runs finish. */
  stop(): void;
  readonly workerId: string;
  readonly stats: WorkerStats;
}
