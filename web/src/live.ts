// Live updates (DESIGN.md, "Live updates"): a single-use ticket from POST /v1/realtime/tickets, then
// the WebSocket URL that carries it. Each change of the user's jobs arrives as
// {"type": "job", "job": <status document>}. Polling stays correct: while the socket is not open the
// console re-reads what it shows every few seconds, and it re-reads once each time the socket
// opens (an update sent before that was missed). A new ticket is taken after a failure (with
// backoff) and before API Gateway's two-hour limit; a ping every five minutes keeps an idle
// connection open (API Gateway closes it after ten). A streaming job's screen follows its output
// ({"action": "follow", "jobId", "after"}): the API replays the events after the cursor, then pushes
// {"type": "output", ...} as they are written; after a reconnect the screen follows again from what
// it holds (its refresh, on open, catches up from GET .../output first).
import type { Api, OutputEvent, StatusDocument } from "./api/client";
import type { LiveMode } from "./state";

const POLL_MS = 5_000;
const QUIET_REFRESH_MS = 30_000;
const PING_MS = 5 * 60_000;
const RENEW_MS = 110 * 60_000;
const MAX_BACKOFF_MS = 60_000;

export interface LiveHooks {
  job: (document: StatusDocument) => void;
  output: (event: OutputEvent) => void;
  mode: (mode: LiveMode) => void;
  /** Re-read what the screen shows (the list page, the job). */
  refresh: () => void;
}

function isJobMessage(value: unknown): value is { type: "job"; job: StatusDocument } {
  if (typeof value !== "object" || value === null) {
    return false;
  }
  const record = value as Record<string, unknown>;
  const job = record["job"] as Record<string, unknown> | undefined;
  return record["type"] === "job" && typeof job === "object" && typeof job?.["jobId"] === "string";
}

function outputEventOf(value: unknown): OutputEvent | null {
  if (typeof value !== "object" || value === null) {
    return null;
  }
  const record = value as Record<string, unknown>;
  const { jobId, attempt, seq, text } = record;
  if (
    record["type"] !== "output" ||
    typeof jobId !== "string" ||
    typeof attempt !== "number" ||
    typeof seq !== "number" ||
    typeof text !== "string"
  ) {
    return null;
  }
  return { jobId, attempt, seq, text };
}

export class Live {
  private socket: WebSocket | null = null;
  private stopped = true;
  private failures = 0;
  private timers: number[] = [];
  private pollTimer: number | null = null;
  private quietTimer: number | null = null;

  constructor(
    private readonly api: Api,
    private readonly hooks: LiveHooks,
  ) {}

  start(): void {
    if (!this.stopped) {
      return;
    }
    this.stopped = false;
    void this.connect();
  }

  stop(): void {
    this.stopped = true;
    this.clearTimers();
    this.stopPolling();
    const socket = this.socket;
    this.socket = null;
    if (socket !== null) {
      socket.onclose = null;
      socket.close(1000, "signed out");
    }
    this.hooks.mode("off");
  }

  private async connect(): Promise<void> {
    if (this.failures === 0) {
      this.hooks.mode("connecting");
    }
    const ticket = await this.api.ticket();
    if (this.stopped) {
      return;
    }
    if (!ticket.ok) {
      this.fallBack();
      return;
    }
    const socket = new WebSocket(ticket.data.url);
    this.socket = socket;
    socket.onopen = () => {
      this.failures = 0;
      this.stopPolling();
      this.hooks.mode("live");
      this.hooks.refresh();
      this.later(() => this.renew(), RENEW_MS);
      this.ping();
      this.quiet();
    };
    socket.onmessage = (event: MessageEvent) => {
      this.quiet();
      let message: unknown;
      try {
        message = JSON.parse(String(event.data));
      } catch {
        return;
      }
      if (isJobMessage(message)) {
        this.hooks.job(message.job);
        return;
      }
      const output = outputEventOf(message);
      if (output !== null) {
        this.hooks.output(output);
      }
    };
    socket.onclose = () => {
      if (this.socket === socket) {
        this.socket = null;
        this.fallBack();
      }
    };
  }

  /** Follow a job's output after `after` (ATTEMPT.SEQ); false when the socket is not open. */
  follow(jobId: string, after: string): boolean {
    const [attempt, seq] = after.split(".").map(Number);
    return this.send({ action: "follow", jobId, after: { attempt, seq } });
  }

  unfollow(jobId: string): void {
    this.send({ action: "unfollow", jobId });
  }

  private send(message: Record<string, unknown>): boolean {
    if (this.socket?.readyState !== WebSocket.OPEN) {
      return false;
    }
    this.socket.send(JSON.stringify(message));
    return true;
  }

  private fallBack(): void {
    if (this.stopped) {
      return;
    }
    this.clearTimers();
    this.hooks.mode("polling");
    this.startPolling();
    this.failures += 1;
    const backoff = Math.min(MAX_BACKOFF_MS, 1000 * 2 ** Math.min(this.failures, 6));
    this.later(() => void this.connect(), backoff);
  }

  private renew(): void {
    const old = this.socket;
    this.socket = null;
    if (old !== null) {
      old.onclose = null;
      old.close(1000, "renewing");
    }
    this.clearTimers();
    void this.connect();
  }

  private ping(): void {
    this.later(() => {
      if (this.socket?.readyState === WebSocket.OPEN) {
        this.socket.send(JSON.stringify({ action: "ping" }));
      }
      this.ping();
    }, PING_MS);
  }

  /** While live: a re-read after 30 quiet seconds, in case a push was lost. */
  private quiet(): void {
    if (this.quietTimer !== null) {
      window.clearTimeout(this.quietTimer);
    }
    this.quietTimer = window.setTimeout(() => {
      this.quietTimer = null;
      if (!this.stopped && this.socket?.readyState === WebSocket.OPEN) {
        this.hooks.refresh();
        this.quiet();
      }
    }, QUIET_REFRESH_MS);
  }

  private startPolling(): void {
    if (this.pollTimer === null) {
      this.pollTimer = window.setInterval(() => this.hooks.refresh(), POLL_MS);
    }
  }

  private stopPolling(): void {
    if (this.pollTimer !== null) {
      window.clearInterval(this.pollTimer);
      this.pollTimer = null;
    }
  }

  private later(action: () => void, delay: number): void {
    this.timers.push(window.setTimeout(action, delay));
  }

  private clearTimers(): void {
    for (const timer of this.timers) {
      window.clearTimeout(timer);
    }
    this.timers = [];
    if (this.quietTimer !== null) {
      window.clearTimeout(this.quietTimer);
      this.quietTimer = null;
    }
  }
}
