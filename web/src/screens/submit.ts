// Submit: an operation, the text (typed, or read from a .txt/.md file) or a document (a file
// uploaded with its progress shown, then read by the service: documents.ts), labels for classify, a
// JSON Schema for extract, and the tier (standard; flex: cheaper, may wait; batch: cheaper, within
// a day). The form is built once and never re-rendered, so nothing the user typed is lost to an
// update; render only patches the document's progress and status.
import type { Operation, Tier } from "../api/client";
import { type Actions, parseLabels } from "../actions";
import { failureBox, h, setText } from "../dom";
import type { DocumentUpload, State } from "../state";
import { DOCUMENT_ACCEPT } from "../upload";
import type { Screen } from "./screen";

const MAX_FILE_BYTES = 1_048_576; // input.text's limit in UTF-8 bytes (DESIGN.md, HTTP contract)
// What the schema field starts with: a schema in the strict subset, to edit rather than to learn.
export const EXAMPLE_SCHEMA = JSON.stringify(
  {
    type: "object",
    properties: {
      vendor: { type: "string" },
      total: { type: "number" },
      currency: { type: ["string", "null"] },
    },
    required: ["vendor", "total", "currency"],
    additionalProperties: false,
  },
  null,
  2,
);

/** What the document's status line says in each phase. */
export function documentStatus(upload: DocumentUpload): string {
  switch (upload.phase) {
    case "uploading": {
      const percent = upload.total > 0 ? Math.floor((100 * upload.sent) / upload.total) : 0;
      return `Uploading ${upload.filename}: ${percent}%`;
    }
    case "reading":
      return `Uploaded ${upload.filename}. Reading its text...`;
    case "ready": {
      const ready = upload.document?.ready;
      const pages = ready?.pages != null ? `${ready.pages} ${ready.pages === 1 ? "page" : "pages"}, ` : "";
      const size = ready !== undefined && ready !== null ? `${formatBytes(ready.textBytes)} of text` : "its text";
      return `${upload.filename} is ready (${pages}${size}): the job runs on it.`;
    }
    case "failed":
      return `${upload.filename} cannot be used.`;
  }
}

function formatBytes(bytes: number): string {
  if (bytes < 1024) {
    return `${bytes} bytes`;
  }
  return bytes < 1024 * 1024 ? `${(bytes / 1024).toFixed(1)} KiB` : `${(bytes / 1024 / 1024).toFixed(1)} MiB`;
}

export class SubmitScreen implements Screen {
  private button: HTMLButtonElement | null = null;
  private failure: HTMLElement | null = null;
  private fileNote: HTMLElement | null = null;
  private text: HTMLTextAreaElement | null = null;
  private documentProgress: HTMLProgressElement | null = null;
  private documentStatus: HTMLElement | null = null;
  private documentFailure: HTMLElement | null = null;
  private documentClear: HTMLButtonElement | null = null;
  /** The Ready document the job runs on, as last rendered. */
  private documentId: string | null = null;

  constructor(private readonly actions: Actions) {}

  mount(main: HTMLElement): void {
    const operation = h(
      "select",
      { id: "operation", name: "operation", required: true },
      h("option", { value: "summarize" }, "Summarize"),
      h("option", { value: "analyze" }, "Analyze"),
      h("option", { value: "classify" }, "Classify"),
      h("option", { value: "extract" }, "Extract (JSON)"),
    );
    const text = h("textarea", { id: "text", name: "text", rows: 12, required: true });
    const file = h("input", { id: "file", name: "file", type: "file", accept: ".txt,.md,text/plain,text/markdown" });
    const labels = h("textarea", { id: "labels", name: "labels", rows: 3, "aria-describedby": "labels-help" });
    const labelsRow = h(
      "div",
      { class: "field", id: "labels-field", hidden: true },
      h("label", { for: "labels" }, "Labels"),
      labels,
      h("p", { id: "labels-help", class: "help" }, "One per line or separated by commas; the model picks one."),
    );
    const schema = h("textarea", {
      id: "schema",
      name: "schema",
      rows: 10,
      spellcheck: "false",
      "aria-describedby": "schema-help",
    });
    schema.value = EXAMPLE_SCHEMA;
    const schemaRow = h(
      "div",
      { class: "field", id: "schema-field", hidden: true },
      h("label", { for: "schema" }, "JSON Schema"),
      schema,
      h(
        "p",
        { id: "schema-help", class: "help" },
        "The object to extract. Every object lists all its properties in required and sets " +
          "additionalProperties to false; a field the text may not state can allow null.",
      ),
    );
    const stream = h("input", { id: "stream", name: "stream", type: "checkbox" });
    const streamRow = h(
      "div",
      { class: "field checkbox", id: "stream-field" },
      stream,
      h("label", { for: "stream" }, "Show the output as it is written"),
    );
    const tier = h(
      "select",
      { id: "tier", name: "tier", "aria-describedby": "tier-help" },
      h("option", { value: "standard" }, "Standard"),
      h("option", { value: "flex" }, "Flex (about half the token price; may wait)"),
      h("option", { value: "batch" }, "Batch (about half the token price; answered within a day)"),
    );
    const tierRow = h(
      "div",
      { class: "field", id: "tier-field" },
      h("label", { for: "tier" }, "Tier"),
      tier,
      h(
        "p",
        { id: "tier-help", class: "help" },
        "Flex runs when the provider has room: a busy provider costs no attempt, and after a while " +
          "the job runs at standard. Batch goes through the provider's Batch API: the job waits on " +
          "the provider's batch (no output as it is written) and is answered within 24 hours. Only " +
          "models priced at the tier take it.",
      ),
    );
    this.fileNote = h("p", { id: "file-note", class: "help", role: "status" });
    this.failure = h("div", { id: "submit-failure" });
    this.button = h("button", { type: "submit", id: "submit-job", class: "primary" }, "Submit job");
    operation.addEventListener("change", () => {
      labelsRow.hidden = operation.value !== "classify";
      labels.required = operation.value === "classify";
      schemaRow.hidden = operation.value !== "extract";
      schema.required = operation.value === "extract";
      // One label: nothing to watch grow. A batch answer arrives whole: nothing to stream either.
      streamRow.hidden = operation.value === "classify" || tier.value === "batch";
    });
    tier.addEventListener("change", () => {
      streamRow.hidden = operation.value === "classify" || tier.value === "batch";
    });
    file.addEventListener("change", () => void this.readFile(file, text));
    const documentFile = h("input", {
      id: "document-file",
      name: "document",
      type: "file",
      accept: DOCUMENT_ACCEPT,
      "aria-describedby": "document-help document-status",
    });
    documentFile.addEventListener("change", () => {
      const chosen = documentFile.files?.[0];
      if (chosen !== undefined) {
        void this.actions.documents.upload(chosen);
      }
      documentFile.value = ""; // the status names the file; choosing it again uploads it again
    });
    this.documentProgress = h("progress", { id: "document-progress", max: 1, value: 0, hidden: true, "aria-label": "Upload progress" });
    this.documentStatus = h("p", { id: "document-status", class: "help", role: "status" });
    this.documentFailure = h("div", { id: "document-failure" });
    this.documentClear = h("button", { type: "button", id: "document-clear", hidden: true }, "Use the text instead");
    this.documentClear.addEventListener("click", () => this.actions.documents.clear());
    this.text = text;
    const form = h(
      "form",
      { id: "submit-form", novalidate: false },
      h("div", { class: "field" }, h("label", { for: "operation" }, "Operation"), operation),
      h("div", { class: "field" }, h("label", { for: "text" }, "Text"), text),
      h(
        "div",
        { class: "field" },
        h("label", { for: "file" }, "Or read the text from a file (.txt, .md)"),
        file,
        this.fileNote,
      ),
      h(
        "div",
        { class: "field", id: "document-field" },
        h("label", { for: "document-file" }, "Or upload a document to run the job on"),
        documentFile,
        h(
          "p",
          { id: "document-help", class: "help" },
          "A PDF, a Word document (.docx), a text or a Markdown file; the service reads its text.",
        ),
        this.documentProgress,
        this.documentStatus,
        this.documentFailure,
        this.documentClear,
      ),
      tierRow,
      labelsRow,
      schemaRow,
      streamRow,
      this.failure,
      this.button,
    );
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      void this.actions.submit({
        operation: operation.value as Operation,
        text: text.value,
        documentId: this.documentId,
        labels: parseLabels(labels.value),
        schema: schema.value,
        stream: stream.checked && operation.value !== "classify" && tier.value !== "batch",
        tier: tier.value as Tier,
      });
    });
    main.replaceChildren(
      h("section", { "aria-labelledby": "submit-title" }, h("h1", { id: "submit-title" }, "New job"), form),
    );
  }

  private async readFile(input: HTMLInputElement, text: HTMLTextAreaElement): Promise<void> {
    const chosen = input.files?.[0];
    if (chosen === undefined || this.fileNote === null) {
      return;
    }
    if (!/\.(txt|md)$/i.test(chosen.name)) {
      this.fileNote.textContent = "Choose a .txt or .md file.";
      return;
    }
    if (chosen.size > MAX_FILE_BYTES) {
      this.fileNote.textContent = "That file is over 1 MiB, the most a job takes.";
      return;
    }
    text.value = await chosen.text();
    this.fileNote.textContent = `Read ${chosen.name}.`;
  }

  render(state: State): void {
    if (this.button === null || this.failure === null) {
      return;
    }
    const upload = state.submit.document;
    const waiting = upload !== null && (upload.phase === "uploading" || upload.phase === "reading");
    this.button.disabled = state.submit.busy || waiting;
    setText(
      this.button,
      state.submit.busy ? "Submitting..." : waiting ? "Waiting for the document..." : "Submit job",
    );
    this.failure.replaceChildren(...(state.submit.failure !== null ? [failureBox(state.submit.failure)] : []));
    this.renderDocument(upload);
  }

  private renderDocument(upload: DocumentUpload | null): void {
    const bar = this.documentProgress;
    if (bar === null || this.documentStatus === null || this.documentFailure === null || this.documentClear === null) {
      return;
    }
    this.documentId = upload?.phase === "ready" ? (upload.document?.documentId ?? null) : null;
    bar.hidden = upload === null || upload.phase === "failed" || upload.phase === "ready";
    bar.max = Math.max(upload?.total ?? 1, 1);
    bar.value = upload?.sent ?? 0;
    if (upload?.phase === "reading") {
      bar.removeAttribute("value"); // indeterminate: the service is reading the file
    }
    setText(this.documentStatus, upload === null ? "" : documentStatus(upload));
    this.documentFailure.replaceChildren(
      ...(upload?.failure != null ? [failureBox(upload.failure, "document-failure-message")] : []),
    );
    this.documentClear.hidden = upload === null;
    if (this.text !== null) {
      // The document is the input: the text is neither needed nor sent while one is chosen.
      this.text.disabled = upload !== null && upload.phase !== "failed";
      this.text.required = !this.text.disabled;
    }
  }

  unmount(): void {
    this.button = null;
    this.failure = null;
    this.text = null;
    this.documentProgress = null;
    this.documentStatus = null;
    this.documentFailure = null;
    this.documentClear = null;
  }
}
