// The console's state, in one place. Screens read it and ask for changes through `update`; every
// change notifies the subscribers (the app's render). Job documents are kept by id, and a document
// never replaces a newer one of the same job (by `revision`): pushes, polls and answers to the
// console's own calls may arrive in any order.
import type { DocumentStatusDocument, JobStatus, ResultDocument, StatusDocument } from "./api/client";
import type { Session } from "./auth";
import type { Config } from "./config";
import type { Failure } from "./problems";
import { Reassembly } from "./reassembly";

export type Route =
  | { screen: "jobs" }
  | { screen: "job"; jobId: string }
  | { screen: "submit" };

/** How updates reach the console: the WebSocket, or polling while it cannot be had. */
export type LiveMode = "off" | "connecting" | "live" | "polling";

export interface ListState {
  status: JobStatus | null;
  /** Cursors of the pages before this one (null: the first page), to go back. */
  previous: (string | null)[];
  cursor: string | null;
  ids: string[];
  nextCursor: string | null;
  loading: boolean;
  loaded: boolean;
  failure: Failure | null;
}

export interface DetailState {
  jobId: string | null;
  loading: boolean;
  failure: Failure | null;
  result: ResultDocument | null;
  resultFailure: Failure | null;
  cancelling: boolean;
  cancelFailure: Failure | null;
  /** A streaming job's text as it is written (DESIGN.md, "Streaming output"), and whether it is all. */
  output: Reassembly;
  outputComplete: boolean;
}

/** Where a file chosen as the job's document stands: sent, then read by the ingest, then usable. */
export type DocumentPhase = "uploading" | "reading" | "ready" | "failed";

export interface DocumentUpload {
  /** Which choice this is: a later file (or none) replaces it, and answers about it are dropped. */
  serial: number;
  filename: string;
  phase: DocumentPhase;
  /** Bytes of the upload sent so far, of `total`. */
  sent: number;
  total: number;
  /** The API's document once it settled Ready (its id is the job's input). */
  document: DocumentStatusDocument | null;
  failure: Failure | null;
}

export interface SubmitState {
  busy: boolean;
  failure: Failure | null;
  /** Set while a submission is being tried: its key is reused by every retry of the same body. */
  pending: { key: string; fingerprint: string } | null;
  /** The job the last submission made (shown on the list until the next route change). */
  submitted: string | null;
  /** The document the next job runs on instead of the text, while one is chosen. */
  document: DocumentUpload | null;
}

export interface State {
  config: Config | null;
  fatal: Failure | null;
  session: Session | null;
  /** Shown on the sign-in screen: why the user is there (expired, signed out, an error). */
  signInNotice: string | null;
  route: Route;
  jobs: Map<string, StatusDocument>;
  list: ListState;
  detail: DetailState;
  submit: SubmitState;
  live: LiveMode;
}

export const PAGE_SIZE = 10;

export function initialList(status: JobStatus | null = null): ListState {
  return {
    status,
    previous: [],
    cursor: null,
    ids: [],
    nextCursor: null,
    loading: false,
    loaded: false,
    failure: null,
  };
}

export function initialDetail(jobId: string | null = null): DetailState {
  return {
    jobId,
    loading: false,
    failure: null,
    result: null,
    resultFailure: null,
    cancelling: false,
    cancelFailure: null,
    output: new Reassembly(),
    outputComplete: false,
  };
}

type Listener = (state: State) => void;

const state: State = {
  config: null,
  fatal: null,
  session: null,
  signInNotice: null,
  route: { screen: "jobs" },
  jobs: new Map(),
  list: initialList(),
  detail: initialDetail(),
  submit: { busy: false, failure: null, pending: null, submitted: null, document: null },
  live: "off",
};
const listeners: Listener[] = [];
let scheduled = false;

export function getState(): Readonly<State> {
  return state;
}

export function subscribe(listener: Listener): void {
  listeners.push(listener);
}

/** Changes the state and renders once per task, however many updates it made. */
export function update(change: (state: State) => void): void {
  change(state);
  if (!scheduled) {
    scheduled = true;
    queueMicrotask(() => {
      scheduled = false;
      for (const listener of listeners) {
        listener(state);
      }
    });
  }
}

/** Keeps the newest document of each job; true when this one was news. */
export function remember(state: State, document: StatusDocument): boolean {
  const known = state.jobs.get(document.jobId);
  if (known !== undefined && known.revision > document.revision) {
    return false;
  }
  state.jobs.set(document.jobId, document);
  return true;
}

/** Everything the signed-in user had here goes when the session does. */
export function clearUserData(state: State): void {
  state.jobs = new Map();
  state.list = initialList();
  state.detail = initialDetail();
  state.submit = { busy: false, failure: null, pending: null, submitted: null, document: null };
  state.live = "off";
}
