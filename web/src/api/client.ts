// The one API client: openapi-fetch over the paths and schemas that openapi-typescript generated
// from docs/openapi.json (api/schema.d.ts; a test fails when it drifts from the document).
import createClient, { type Middleware } from "openapi-fetch";
import { type Failure, failureOf, networkFailure } from "../problems";
import type { components, paths } from "./schema";

export type StatusDocument = components["schemas"]["StatusDocument"];
export type ResultDocument = components["schemas"]["ResultDocument"];
export type JobPage = components["schemas"]["JobPage"];
export type JobStatus = components["schemas"]["JobStatus"];
export type Operation = components["schemas"]["Operation"];
export type Tier = components["schemas"]["Tier"];
export type SubmitRequest = components["schemas"]["SubmitRequest"];
export type TicketDocument = components["schemas"]["TicketDocument"];
export type BudgetDocument = components["schemas"]["BudgetDocument"];
export type OutputPage = components["schemas"]["OutputPage"];
export type OutputEvent = components["schemas"]["OutputEventDocument"];
export type ContentType = components["schemas"]["ContentType"];
export type CreateDocumentRequest = components["schemas"]["CreateDocumentRequest"];
export type CreatedDocument = components["schemas"]["CreatedDocument"];
export type DocumentStatusDocument = components["schemas"]["DocumentStatusDocument"];
export type UploadForm = components["schemas"]["UploadForm"];

export const JOB_STATUSES: readonly JobStatus[] = [
  "Pending",
  "Running",
  "Succeeded",
  "Failed",
  "CancellationRequested",
  "Canceled",
];
export const TERMINAL: ReadonlySet<JobStatus> = new Set<JobStatus>(["Succeeded", "Failed", "Canceled"]);

/** A call's outcome: the typed document, or what to show the user. */
export type Outcome<T> =
  | { ok: true; data: T; response: Response }
  | { ok: false; failure: Failure; response?: Response; retryAfter?: number };

export interface ApiOptions {
  baseUrl: string;
  /** The current ID token, or null when signed out. */
  token: () => string | null;
  /** Called on API Gateway's 401: the token expired or was refused. */
  onUnauthorized: () => void;
}

export function retryAfterOf(response: Response): number | undefined {
  const value = response.headers.get("Retry-After");
  return value !== null && /^\d+$/.test(value) ? Number(value) : undefined;
}

async function settle<T>(
  call: Promise<{ data?: T; error?: unknown; response: Response }>,
): Promise<Outcome<T>> {
  let answer: { data?: T; error?: unknown; response: Response };
  try {
    answer = await call;
  } catch {
    return { ok: false, failure: networkFailure() };
  }
  const { data, error, response } = answer;
  if (response.ok && data !== undefined) {
    return { ok: true, data, response };
  }
  const failed: Outcome<T> = { ok: false, failure: failureOf(response.status, error), response };
  const retryAfter = retryAfterOf(response);
  if (retryAfter !== undefined) {
    failed.retryAfter = retryAfter;
  }
  return failed;
}

export class Api {
  private readonly client;

  constructor(options: ApiOptions) {
    this.client = createClient<paths>({ baseUrl: options.baseUrl });
    const auth: Middleware = {
      onRequest({ request }) {
        const token = options.token();
        if (token !== null) {
          request.headers.set("Authorization", `Bearer ${token}`);
        }
        return request;
      },
      onResponse({ response }) {
        if (response.status === 401) {
          options.onUnauthorized();
        }
        return response;
      },
    };
    this.client.use(auth);
  }

  listJobs(status: JobStatus | null, cursor: string | null, limit: number): Promise<Outcome<JobPage>> {
    const query: { limit: number; status?: JobStatus; cursor?: string } = { limit };
    if (status !== null) {
      query.status = status;
    }
    if (cursor !== null) {
      query.cursor = cursor;
    }
    return settle(this.client.GET("/v1/jobs", { params: { query } }));
  }

  getJob(jobId: string): Promise<Outcome<StatusDocument>> {
    return settle(this.client.GET("/v1/jobs/{job_id}", { params: { path: { job_id: jobId } } }));
  }

  getResult(jobId: string): Promise<Outcome<ResultDocument>> {
    return settle(this.client.GET("/v1/jobs/{job_id}/result", { params: { path: { job_id: jobId } } }));
  }

  /** A streaming job's events after a cursor (ATTEMPT.SEQ). */
  getOutput(jobId: string, after: string): Promise<Outcome<OutputPage>> {
    return settle(
      this.client.GET("/v1/jobs/{job_id}/output", { params: { path: { job_id: jobId }, query: { after } } }),
    );
  }

  cancel(jobId: string): Promise<Outcome<StatusDocument>> {
    return settle(
      this.client.POST("/v1/jobs/{job_id}/cancellation", { params: { path: { job_id: jobId } } }),
    );
  }

  submit(body: SubmitRequest, idempotencyKey: string): Promise<Outcome<StatusDocument>> {
    return settle(
      this.client.POST("/v1/jobs", { params: { header: { "idempotency-key": idempotencyKey } }, body }),
    );
  }

  /** A document about to be uploaded: its id and the presigned POST to upload its file with. */
  createDocument(body: CreateDocumentRequest): Promise<Outcome<CreatedDocument>> {
    return settle(this.client.POST("/v1/documents", { body }));
  }

  getDocument(documentId: string): Promise<Outcome<DocumentStatusDocument>> {
    return settle(
      this.client.GET("/v1/documents/{document_id}", { params: { path: { document_id: documentId } } }),
    );
  }

  ticket(): Promise<Outcome<TicketDocument>> {
    return settle(this.client.POST("/v1/realtime/tickets"));
  }

  budget(): Promise<Outcome<BudgetDocument>> {
    return settle(this.client.GET("/v1/budget"));
  }
}
