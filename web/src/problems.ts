// What the console shows when a call fails: the problem+json `title` and `detail` the API wrote
// for people, or a sentence of ours for answers that are not problem+json (API Gateway's own 401,
// 429 and 5xx bodies, a network failure). Never a raw body, status line or exception text.

export interface Failure {
  title: string;
  detail: string;
  /** The problem's stable code, when the API sent one (e.g. `idempotency_key_reused`). */
  code?: string;
  status?: number;
}

function isProblem(body: unknown): body is { title: string; detail: string; code?: unknown } {
  if (typeof body !== "object" || body === null) {
    return false;
  }
  const record = body as Record<string, unknown>;
  return typeof record["title"] === "string" && typeof record["detail"] === "string";
}

/** The failure to show for an HTTP answer that was not a success. */
export function failureOf(status: number, body: unknown): Failure {
  if (isProblem(body)) {
    const failure: Failure = { title: body.title, detail: body.detail, status };
    if (typeof body.code === "string") {
      failure.code = body.code;
    }
    return failure;
  }
  if (status === 401) {
    return { title: "Signed out", detail: "Your session has ended. Sign in again.", status };
  }
  if (status === 429) {
    return { title: "Too many requests", detail: "The API is busy. Try again in a moment.", status };
  }
  if (status === 413) {
    return { title: "Too large", detail: "The request is larger than the API accepts.", status };
  }
  if (status === 404) {
    return { title: "Not found", detail: "There is nothing at this address.", status };
  }
  if (status >= 500) {
    return { title: "Service problem", detail: "The service could not answer. Try again in a moment.", status };
  }
  return { title: "Request refused", detail: "The API refused the request.", status };
}

/** The failure to show when no answer came at all (offline, DNS, CORS refused...). */
export function networkFailure(): Failure {
  return { title: "Cannot reach the API", detail: "Check your connection and try again." };
}
