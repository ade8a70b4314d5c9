// A file to the documents bucket with the presigned POST the API answered (DESIGN.md, "Documents"):
// the form's fields, then the file last, straight to S3 (in local mode, the upload front standing for
// it). XMLHttpRequest rather than fetch, because only it reports an upload's progress; the bucket's
// CORS allows the console's origin (the preflight such an upload sends included) and its CSP
// connect-src names the bucket. S3's refusals are XML: the console shows its own sentence for each
// code, never the raw body.
import type { ContentType, UploadForm } from "./api/client";
import type { Failure } from "./problems";

/** The types the API takes, by file name suffix (as the command line's `documents upload`). */
const CONTENT_TYPES: Readonly<Record<string, ContentType>> = {
  pdf: "application/pdf",
  docx: "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
  md: "text/markdown",
  markdown: "text/markdown",
  txt: "text/plain",
  text: "text/plain",
};
export const DOCUMENT_ACCEPT = ".pdf,.docx,.md,.markdown,.txt,.text";

/** The API's content type for a file's name, or null when it names none the API takes. */
export function contentTypeOf(filename: string): ContentType | null {
  const suffix = /\.([^.]+)$/.exec(filename)?.[1]?.toLowerCase();
  return suffix !== undefined ? (CONTENT_TYPES[suffix] ?? null) : null;
}

export type UploadOutcome = { ok: true } | { ok: false; failure: Failure };

/** The failure to show for S3's answer to a refused POST (its XML error's code). */
export function uploadFailure(status: number, body: string): Failure {
  const code = /<Code>([^<]*)<\/Code>/.exec(body)?.[1] ?? "";
  const title = "The upload was refused";
  if (code === "EntityTooLarge" || code === "EntityTooSmall") {
    return { title, detail: "The file's size is not the size the console declared. Choose the file again.", code, status };
  }
  if (code === "AccessDenied" && /expired/i.test(body)) {
    return { title, detail: "The upload's permission expired before it was sent. Choose the file again.", code, status };
  }
  if (code === "AccessDenied" || code === "SignatureDoesNotMatch" || code === "InvalidAccessKeyId") {
    return { title, detail: "The storage did not allow this upload. Choose the file again.", code, status };
  }
  if (status >= 500) {
    return { title, detail: "The storage could not take the file just now. Try again in a moment.", code, status };
  }
  return {
    title,
    detail: code !== "" ? `The storage refused the file (${code}). Choose the file again.` : "The storage refused the file.",
    code,
    status,
  };
}

/** POSTs the form and the file; `progress(sent, total)` as the bytes go out. */
export function postUpload(
  upload: UploadForm,
  file: Blob,
  filename: string,
  progress: (sent: number, total: number) => void,
): Promise<UploadOutcome> {
  const form = new FormData();
  for (const [name, value] of Object.entries(upload.fields)) {
    form.append(name, value);
  }
  form.append("file", file, filename); // last: S3 ignores every field after the file
  return new Promise((resolve) => {
    const request = new XMLHttpRequest();
    request.open("POST", upload.url);
    request.upload.addEventListener("progress", (event) => {
      if (event.lengthComputable) {
        progress(event.loaded, event.total);
      }
    });
    request.addEventListener("load", () => {
      if (request.status >= 200 && request.status < 300) {
        resolve({ ok: true });
      } else {
        resolve({ ok: false, failure: uploadFailure(request.status, request.responseText) });
      }
    });
    const unreachable = (): void =>
      resolve({
        ok: false,
        failure: { title: "Cannot reach the storage", detail: "The file could not be sent. Check your connection and try again." },
      });
    request.addEventListener("error", unreachable);
    request.addEventListener("timeout", unreachable);
    request.addEventListener("abort", unreachable);
    request.send(form);
  });
}
