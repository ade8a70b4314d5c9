// What the screens can ask for. Every action reads and changes the one state (state.ts) and talks
// to the API through the one client; screens only render and call these.
import {
  type Api,
  type JobStatus,
  type Operation,
  type OutputEvent,
  type StatusDocument,
  type SubmitRequest,
  type Tier,
  TERMINAL,
} from "./api/client";
import { DocumentUploads } from "./documents";
import { type Failure, networkFailure } from "./problems";
import { getState, initialDetail, initialList, PAGE_SIZE, remember, update } from "./state";

const SUBMIT_ATTEMPTS = 4;
const MAX_PAGE_CALLS = 5;
const MAX_RETRY_WAIT_S = 10;
const MAX_OUTPUT_CALLS = 20; // pages read in one catch-up (100 events each); the rest comes live

export interface SubmitForm {
  operation: Operation;
  text: string;
  /** A Ready document of the user's: the job runs on its text instead of `text`. */
  documentId: string | null;
  labels: string[];
  /** extract's JSON Schema as typed (JSON text); the API checks that it is in the strict subset. */
  schema: string;
  /** Stream the output as it is written (summarize, analyze and extract). */
  stream: boolean;
  /** The tier its calls go out at (DESIGN.md, "Cost tiers"); standard is sent as nothing. */
  tier: Tier;
}

/** What the actions ask of the live connection: following a streaming job's output. */
export interface OutputFollowing {
  follow: (jobId: string, after: string) => boolean;
  unfollow: (jobId: string) => void;
}

/** A schema field that is not a JSON object: said at once, nothing is sent. */
export class SchemaNotJson extends Error {}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => window.setTimeout(resolve, ms));
}

function newKey(): string {
  return crypto.randomUUID();
}

/** The submit body; only what the user chose (no server defaults), as the fingerprint wants. */
export function submitBody(form: SubmitForm): SubmitRequest {
  const input = form.documentId !== null ? { documentId: form.documentId } : { text: form.text };
  const body: SubmitRequest = { operation: form.operation, input };
  if (form.operation === "classify") {
    body.options = { labels: form.labels };
  }
  if (form.operation === "extract") {
    body.options = { schema: parseSchema(form.schema) };
  }
  if (form.stream && form.operation !== "classify") {
    body.options = { ...body.options, stream: true };
  }
  if (form.tier !== "standard") {
    body.options = { ...body.options, tier: form.tier };
  }
  return body;
}

function parseSchema(raw: string): Record<string, unknown> {
  let schema: unknown;
  try {
    schema = JSON.parse(raw);
  } catch {
    throw new SchemaNotJson();
  }
  if (typeof schema !== "object" || schema === null || Array.isArray(schema)) {
    throw new SchemaNotJson();
  }
  return schema as Record<string, unknown>;
}

/** The JSON the result screen shows: an extract job's object, indented; text as it is. */
export function formatOutput(output: string | Record<string, unknown>): string {
  return typeof output === "string" ? output : JSON.stringify(output, null, 2);
}

export function parseLabels(raw: string): string[] {
  return raw
    .split(/[\n,]/)
    .map((label) => label.trim())
    .filter((label) => label !== "");
}

export class Actions {
  private following: string | null = null;
  private readonly reading = new Set<string>();
  /** A file uploaded as the next job's document (documents.ts). */
  readonly documents: DocumentUploads;

  constructor(
    private readonly api: Api,
    private readonly navigate: (hash: string) => void,
    private readonly live: OutputFollowing = { follow: () => false, unfollow: () => undefined },
  ) {
    this.documents = new DocumentUploads(api);
  }

  // --- my jobs ---------------------------------------------------------------------------------

  /**
   * One page of the list. The API may answer a short page while nextCursor is set (it filters by
   * status after reading its index), so the console follows the cursor, asking only for what is
   * still missing, until the page is full, the list ends, or a few calls were made.
   */
  async loadList(): Promise<void> {
    const { list } = getState();
    const asked = { status: list.status, cursor: list.cursor };
    update((s) => {
      s.list.loading = true;
    });
    const items: StatusDocument[] = [];
    let cursor = asked.cursor;
    let next: string | null = null;
    let failure: Failure | null = null;
    for (let call = 0; call < MAX_PAGE_CALLS; call += 1) {
      const outcome = await this.api.listJobs(asked.status, cursor, PAGE_SIZE - items.length);
      if (!outcome.ok) {
        failure = outcome.failure;
        break;
      }
      items.push(...outcome.data.items);
      next = outcome.data.nextCursor;
      if (next === null || items.length >= PAGE_SIZE) {
        break;
      }
      cursor = next;
    }
    update((s) => {
      if (s.list.status !== asked.status || s.list.cursor !== asked.cursor) {
        return; // the user moved on while this page was on its way
      }
      s.list.loading = false;
      s.list.loaded = true;
      if (failure !== null) {
        s.list.failure = failure;
        return;
      }
      s.list.failure = null;
      for (const document of items) {
        remember(s, document);
      }
      const fetched = items.map((d) => d.jobId);
      // Jobs pushed onto the first page since (newer than anything the page holds) stay on top.
      const pushed =
        s.list.cursor === null
          ? s.list.ids.filter((id) => !fetched.includes(id) && this.isNewer(id, fetched))
          : [];
      s.list.ids = [...pushed, ...fetched];
      s.list.nextCursor = next;
    });
  }

  private isNewer(id: string, than: string[]): boolean {
    const jobs = getState().jobs;
    const created = jobs.get(id)?.createdAt ?? "";
    return than.every((other) => (jobs.get(other)?.createdAt ?? "") < created);
  }

  setFilter(status: JobStatus | null): void {
    update((s) => {
      s.list = initialList(status);
    });
    void this.loadList();
  }

  nextPage(): void {
    const { list } = getState();
    if (list.nextCursor === null) {
      return;
    }
    update((s) => {
      s.list.previous = [...s.list.previous, s.list.cursor];
      s.list.cursor = list.nextCursor;
      s.list.ids = [];
      s.list.nextCursor = null;
      s.list.loaded = false;
    });
    void this.loadList();
  }

  previousPage(): void {
    const { list } = getState();
    if (list.previous.length === 0) {
      return;
    }
    update((s) => {
      s.list.cursor = s.list.previous[s.list.previous.length - 1] ?? null;
      s.list.previous = s.list.previous.slice(0, -1);
      s.list.ids = [];
      s.list.nextCursor = null;
      s.list.loaded = false;
    });
    void this.loadList();
  }

  /** A pushed document: remembered, and put on top of the first page when it is a new job that fits. */
  received(document: StatusDocument): void {
    const state = getState();
    const wasKnown = state.jobs.has(document.jobId);
    update((s) => {
      if (!remember(s, document)) {
        return;
      }
      const onFirstPage = s.list.cursor === null && s.list.loaded;
      const fits = s.list.status === null || s.list.status === document.status;
      if (!wasKnown && onFirstPage && fits && !s.list.ids.includes(document.jobId)) {
        s.list.ids = [document.jobId, ...s.list.ids].slice(0, PAGE_SIZE);
      }
    });
    if (state.detail.jobId === document.jobId && document.status === "Succeeded") {
      void this.loadResult(document.jobId);
    }
    if (state.detail.jobId === document.jobId && document.stream && TERMINAL.has(document.status)) {
      void this.loadOutput(document.jobId); // ended: read the rest, and which attempt is the result's
    }
  }

  // --- a streaming job's output ----------------------------------------------------------------

  /** A pushed output event of the job on screen. */
  outputReceived(event: OutputEvent): void {
    update((s) => {
      if (s.detail.jobId === event.jobId) {
        s.detail.output.add(event.attempt, event.seq, event.text);
      }
    });
  }

  /**
   * Catch up from GET .../output (after what the screen holds), then follow the rest over the
   * socket from there: after a reload or a reconnect the text so far shows at once, then grows.
   */
  async loadOutput(jobId: string): Promise<void> {
    if (this.reading.has(jobId)) {
      return;
    }
    this.reading.add(jobId);
    try {
      for (let calls = 0; calls < MAX_OUTPUT_CALLS; calls += 1) {
        const detail = getState().detail;
        if (detail.jobId !== jobId || detail.outputComplete) {
          return;
        }
        const outcome = await this.api.getOutput(jobId, detail.output.cursor());
        if (!outcome.ok) {
          return; // the screen's refresh tries again
        }
        const page = outcome.data;
        update((s) => {
          if (s.detail.jobId !== jobId) {
            return;
          }
          for (const event of page.events) {
            s.detail.output.add(event.attempt, event.seq, event.text);
          }
          if (page.complete) {
            s.detail.output.settle(page.resultAttempt);
            s.detail.outputComplete = true;
          }
        });
        if (page.complete || page.events.length === 0) {
          break;
        }
      }
    } finally {
      this.reading.delete(jobId);
    }
    const detail = getState().detail;
    if (detail.jobId === jobId && !detail.outputComplete) {
      this.following = this.live.follow(jobId, detail.output.cursor()) ? jobId : this.following;
    }
  }

  /** Leaving a job's screen: stop following its output. */
  stopFollowing(): void {
    if (this.following !== null) {
      this.live.unfollow(this.following);
      this.following = null;
    }
  }

  // --- one job ---------------------------------------------------------------------------------

  async loadJob(jobId: string): Promise<void> {
    update((s) => {
      if (s.detail.jobId !== jobId) {
        s.detail = initialDetail(jobId);
      }
      s.detail.loading = true;
    });
    const outcome = await this.api.getJob(jobId);
    update((s) => {
      if (s.detail.jobId !== jobId) {
        return;
      }
      s.detail.loading = false;
      if (!outcome.ok) {
        s.detail.failure = outcome.failure;
        return;
      }
      s.detail.failure = null;
      remember(s, outcome.data);
    });
    const known = getState().jobs.get(jobId);
    if (known?.stream === true) {
      void this.loadOutput(jobId);
    }
    if (known?.status === "Succeeded") {
      await this.loadResult(jobId);
    }
  }

  async loadResult(jobId: string): Promise<void> {
    const { detail } = getState();
    if (detail.jobId !== jobId || detail.result !== null) {
      return;
    }
    const outcome = await this.api.getResult(jobId);
    update((s) => {
      if (s.detail.jobId !== jobId) {
        return;
      }
      if (outcome.ok) {
        s.detail.result = outcome.data;
        s.detail.resultFailure = null;
      } else {
        s.detail.resultFailure = outcome.failure;
      }
    });
  }

  async cancel(jobId: string): Promise<void> {
    update((s) => {
      s.detail.cancelling = true;
      s.detail.cancelFailure = null;
    });
    const outcome = await this.api.cancel(jobId);
    update((s) => {
      s.detail.cancelling = false;
      if (outcome.ok) {
        remember(s, outcome.data);
      } else {
        s.detail.cancelFailure = outcome.failure;
      }
    });
  }

  // --- submit ----------------------------------------------------------------------------------

  /**
   * One submission: one Idempotency-Key, reused by every retry of the same body (a lost answer, a
   * 429, a 5xx) and by a second click on an unchanged form, so a retry can never make a second
   * job. A changed form is a new submission with a new key.
   */
  async submit(form: SubmitForm): Promise<void> {
    if (getState().submit.busy) {
      return;
    }
    let body: SubmitRequest;
    try {
      body = submitBody(form);
    } catch (error) {
      if (!(error instanceof SchemaNotJson)) {
        throw error;
      }
      update((s) => {
        s.submit.failure = {
          title: "The schema is not a JSON object",
          detail: "Write the schema as JSON, an object such as the example under the field.",
        };
      });
      return;
    }
    const fingerprint = JSON.stringify(body);
    const pending = getState().submit.pending;
    const key = pending !== null && pending.fingerprint === fingerprint ? pending.key : newKey();
    update((s) => {
      s.submit.busy = true;
      s.submit.failure = null;
      s.submit.pending = { key, fingerprint };
    });
    let failure: Failure = networkFailure();
    for (let attempt = 1; attempt <= SUBMIT_ATTEMPTS; attempt += 1) {
      const outcome = await this.api.submit(body, key);
      if (outcome.ok) {
        const job = outcome.data;
        update((s) => {
          // The document stays chosen: another operation on it is one more submit.
          s.submit = { ...s.submit, busy: false, failure: null, pending: null, submitted: job.jobId };
          remember(s, job);
          s.list = initialList();
          s.list.ids = [job.jobId];
        });
        // A streamed job is watched on its own screen, where its text grows.
        this.navigate(job.stream ? `#/jobs/${job.jobId}` : "#/jobs");
        return;
      }
      failure = outcome.failure;
      const status = outcome.response?.status;
      const retryable = status === undefined || status === 429 || status >= 500;
      if (!retryable || attempt === SUBMIT_ATTEMPTS) {
        break;
      }
      const wait = Math.min(outcome.retryAfter ?? 2 ** (attempt - 1), MAX_RETRY_WAIT_S);
      await sleep(wait * 1000);
    }
    update((s) => {
      s.submit.busy = false;
      s.submit.failure = failure;
    });
  }

  // --- the current screen ----------------------------------------------------------------------

  /** Re-read what the current screen shows (after the socket opened, or while polling). */
  refresh(): void {
    const state = getState();
    if (state.session === null) {
      return;
    }
    if (state.route.screen === "jobs") {
      void this.loadList();
    } else if (state.route.screen === "job") {
      const job = state.jobs.get(state.route.jobId);
      const outputPending = job?.stream === true && !state.detail.outputComplete;
      if (
        job === undefined ||
        !TERMINAL.has(job.status) ||
        (job.status === "Succeeded" && state.detail.result === null) ||
        outputPending
      ) {
        void this.loadJob(state.route.jobId);
      }
    }
  }
}
