// A file as the next job's document (DESIGN.md, "Documents: upload once, run jobs on them"): the
// create (POST /v1/documents, the call the command line's `documents upload` makes), the presigned
// POST with its progress (upload.ts), then GET /v1/documents/{id} until the ingest read it: Ready
// (the job's input is then `{documentId}`) or Rejected with its code. The create is not idempotent
// and the upload is one POST, so neither is retried: choosing the file again makes a new document
// (one left awaiting its upload expires). Only the wait retries what may pass (no answer, 429, 5xx).
import { type Api, type DocumentStatusDocument, retryAfterOf } from "./api/client";
import type { Failure } from "./problems";
import { type DocumentUpload, getState, update } from "./state";
import { contentTypeOf, postUpload } from "./upload";

const POLL_MS = 1000;
const MAX_POLL_MS = 5000;
// The ingest's own limit is two minutes; queues and a cold start come before it.
const WAIT_LIMIT_MS = 10 * 60 * 1000;
const WAIT_FAILURES = 5; // unanswered polls in a row before the console gives up

export const UNSUPPORTED: Failure = {
  title: "Unsupported file type",
  detail: "Choose a PDF, a Word document (.docx), a text file (.txt) or a Markdown file (.md).",
  code: "unsupported_document_type",
};

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => window.setTimeout(resolve, ms));
}

/** The failure to show for a document the ingest rejected: its stable code and its message. */
export function rejection(document: DocumentStatusDocument): Failure {
  const error = document.error;
  return error !== null
    ? { title: `The document was rejected: ${error.code}`, detail: error.message, code: error.code }
    : { title: "The document was rejected", detail: "Its text could not be read." };
}

export class DocumentUploads {
  private serial = 0;

  constructor(private readonly api: Api) {}

  /** Upload `file` as the next job's document, replacing any chosen before. */
  async upload(file: File): Promise<void> {
    this.serial += 1;
    const serial = this.serial;
    const chosen: DocumentUpload = {
      serial,
      filename: file.name,
      phase: "uploading",
      sent: 0,
      total: file.size,
      document: null,
      failure: null,
    };
    const contentType = contentTypeOf(file.name);
    update((s) => {
      s.submit.document = contentType === null ? { ...chosen, phase: "failed", failure: UNSUPPORTED } : chosen;
    });
    if (contentType === null) {
      return;
    }
    // Too large or a refused type is the API's problem+json (413 document_too_large, 415), shown as is.
    const created = await this.api.createDocument({ filename: file.name, contentType, bytes: file.size });
    if (!created.ok) {
      this.fail(serial, created.failure);
      return;
    }
    const sent = await postUpload(created.data.upload, file, file.name, (bytes, total) =>
      this.change(serial, (d) => {
        d.sent = bytes;
        d.total = total;
      }),
    );
    if (!sent.ok) {
      this.fail(serial, sent.failure);
      return;
    }
    this.change(serial, (d) => {
      d.phase = "reading";
      d.sent = d.total;
    });
    await this.waitSettled(serial, created.data.documentId);
  }

  /** Back to text: the chosen document is forgotten (it stays the user's, and expires). */
  clear(): void {
    this.serial += 1;
    update((s) => {
      s.submit.document = null;
    });
  }

  private async waitSettled(serial: number, documentId: string): Promise<void> {
    const deadline = Date.now() + WAIT_LIMIT_MS;
    let failures = 0;
    for (;;) {
      const outcome = await this.api.getDocument(documentId);
      if (!this.current(serial)) {
        return;
      }
      let wait = POLL_MS;
      if (outcome.ok) {
        failures = 0;
        const document = outcome.data;
        if (document.status === "Ready") {
          this.change(serial, (d) => {
            d.phase = "ready";
            d.document = document;
          });
          return;
        }
        if (document.status === "Rejected") {
          this.fail(serial, rejection(document));
          return;
        }
        wait = (retryAfterOf(outcome.response) ?? 1) * 1000;
      } else {
        const status = outcome.response?.status;
        failures += 1;
        if ((status !== undefined && status !== 429 && status < 500) || failures >= WAIT_FAILURES) {
          this.fail(serial, outcome.failure);
          return;
        }
        wait = (outcome.retryAfter ?? 2 ** failures) * 1000;
      }
      if (Date.now() >= deadline) {
        this.fail(serial, {
          title: "The document is still being read",
          detail: "Its text is taking longer than usual. Choose the file again later.",
        });
        return;
      }
      await sleep(Math.min(Math.max(wait, POLL_MS / 2), MAX_POLL_MS));
    }
  }

  /** True while `serial` is the chosen document (not replaced, cleared, or signed out). */
  private current(serial: number): boolean {
    return getState().submit.document?.serial === serial;
  }

  private change(serial: number, change: (document: DocumentUpload) => void): void {
    update((s) => {
      if (s.submit.document !== null && s.submit.document.serial === serial) {
        change(s.submit.document);
      }
    });
  }

  private fail(serial: number, failure: Failure): void {
    this.change(serial, (d) => {
      d.phase = "failed";
      d.failure = failure;
    });
  }
}
