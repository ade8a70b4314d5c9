// My jobs: newest first, a status filter, pages (the API's cursors), live rows. Rows are kept by job
// id and patched in place, so an update never moves the keyboard focus or the scroll position.
import { JOB_STATUSES, type JobStatus, type StatusDocument } from "../api/client";
import type { Actions } from "../actions";
import { failureBox, formatTime, h, setText, statusLabel } from "../dom";
import type { State } from "../state";
import type { Screen } from "./screen";

interface Row {
  row: HTMLTableRowElement;
  status: HTMLElement;
  progress: HTMLElement;
  updated: HTMLElement;
}

function progressText(job: StatusDocument): string {
  const { completedSteps, totalSteps } = job.progress;
  return `${completedSteps} of ${totalSteps}`;
}

export class JobsScreen implements Screen {
  private rows = new Map<string, Row>();
  private body: HTMLTableSectionElement | null = null;
  private filter: HTMLSelectElement | null = null;
  private empty: HTMLElement | null = null;
  private failure: HTMLElement | null = null;
  private notice: HTMLElement | null = null;
  private older: HTMLButtonElement | null = null;
  private newer: HTMLButtonElement | null = null;

  constructor(private readonly actions: Actions) {}

  mount(main: HTMLElement): void {
    this.rows = new Map();
    const filter = h("select", { id: "status-filter", name: "status" }, h("option", { value: "" }, "All"));
    for (const status of JOB_STATUSES) {
      filter.append(h("option", { value: status }, statusLabel(status)));
    }
    filter.addEventListener("change", () => {
      this.actions.setFilter(filter.value === "" ? null : (filter.value as JobStatus));
    });
    this.filter = filter;
    this.body = h("tbody", { id: "job-rows" });
    this.empty = h("p", { class: "empty", id: "no-jobs", hidden: true }, "No jobs here yet.");
    this.failure = h("div", { id: "list-failure" });
    this.notice = h("p", { class: "notice", id: "submitted", role: "status", hidden: true });
    this.newer = h("button", { type: "button", id: "newer-page" }, "Newer");
    this.older = h("button", { type: "button", id: "older-page" }, "Older");
    this.newer.addEventListener("click", () => this.actions.previousPage());
    this.older.addEventListener("click", () => this.actions.nextPage());
    main.replaceChildren(
      h(
        "section",
        { "aria-labelledby": "jobs-title" },
        h("div", { class: "heading" }, h("h1", { id: "jobs-title" }, "My jobs"), h("a", { href: "#/submit", class: "button primary" }, "New job")),
        this.notice,
        h("div", { class: "filters" }, h("label", { for: "status-filter" }, "Status"), filter),
        this.failure,
        h(
          "table",
          { class: "jobs", id: "jobs-table" },
          h("caption", { class: "visually-hidden" }, "Your jobs, newest first"),
          h(
            "thead",
            {},
            h(
              "tr",
              {},
              h("th", { scope: "col" }, "Job"),
              h("th", { scope: "col" }, "Operation"),
              h("th", { scope: "col" }, "Status"),
              h("th", { scope: "col" }, "Steps done"),
              h("th", { scope: "col" }, "Updated"),
            ),
          ),
          this.body,
        ),
        this.empty,
        h("nav", { class: "pages", "aria-label": "Pages" }, this.newer, this.older),
      ),
    );
  }

  render(state: State): void {
    if (this.body === null || this.filter === null) {
      return;
    }
    const { list } = state;
    if (this.filter.value !== (list.status ?? "")) {
      this.filter.value = list.status ?? "";
    }
    this.failure?.replaceChildren(...(list.failure !== null ? [failureBox(list.failure)] : []));
    const submitted = state.submit.submitted;
    if (this.notice !== null) {
      this.notice.hidden = submitted === null;
      setText(this.notice, submitted !== null ? `Submitted job ${submitted.slice(0, 8)}.` : "");
    }
    const wanted: HTMLTableRowElement[] = [];
    for (const id of list.ids) {
      const job = state.jobs.get(id);
      if (job !== undefined) {
        wanted.push(this.row(job));
      }
    }
    for (const [id, row] of this.rows) {
      if (!list.ids.includes(id)) {
        row.row.remove();
        this.rows.delete(id);
      }
    }
    wanted.forEach((row, index) => {
      if (this.body !== null && this.body.children[index] !== row) {
        this.body.insertBefore(row, this.body.children[index] ?? null);
      }
    });
    if (this.empty !== null) {
      this.empty.hidden = !(list.loaded && list.ids.length === 0 && list.failure === null);
      setText(this.empty, list.nextCursor === null ? "No jobs here yet." : "None on this page; try Older.");
    }
    if (this.newer !== null && this.older !== null) {
      this.newer.disabled = list.previous.length === 0;
      this.older.disabled = list.nextCursor === null;
    }
  }

  private row(job: StatusDocument): HTMLTableRowElement {
    let row = this.rows.get(job.jobId);
    if (row === undefined) {
      const status = h("td", { class: "status" });
      const progress = h("td", { class: "progress" });
      const updated = h("td", {});
      const element = h(
        "tr",
        { "data-job-id": job.jobId },
        h("td", {}, h("a", { href: `#/jobs/${job.jobId}`, class: "job-link" }, job.jobId.slice(0, 8))),
        h("td", {}, job.operation),
        status,
        progress,
        updated,
      );
      row = { row: element, status, progress, updated };
      this.rows.set(job.jobId, row);
    }
    row.row.dataset["status"] = job.status;
    setText(row.status, statusLabel(job.status));
    setText(row.progress, progressText(job));
    setText(row.updated, formatTime(job.updatedAt));
    return row.row;
  }

  unmount(): void {
    this.rows = new Map();
    this.body = null;
    this.filter = null;
  }
}
