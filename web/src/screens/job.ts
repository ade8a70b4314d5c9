// One job: status, attempts, progress (a progress bar over its steps), the result once it
// succeeded, the error code and message once it failed, and cancel while it can be canceled. A
// streaming job shows its output as it is written instead of the result (the same text, once it
// succeeded); after a reload it shows the text so far at once, then the rest as it comes.
import { TERMINAL } from "../api/client";
import { type Actions, formatOutput } from "../actions";
import { failureBox, formatTime, h, setText, statusLabel } from "../dom";
import type { State } from "../state";
import type { Screen } from "./screen";

export class JobScreen implements Screen {
  private fields = new Map<string, HTMLElement>();
  private bar: HTMLProgressElement | null = null;
  private cancel: HTMLButtonElement | null = null;
  private failure: HTMLElement | null = null;
  private errorBox: HTMLElement | null = null;
  private resultBox: HTMLElement | null = null;
  private output: HTMLElement | null = null;
  private streamBox: HTMLElement | null = null;
  private streamText: HTMLElement | null = null;
  private streamNote: HTMLElement | null = null;

  constructor(
    private readonly actions: Actions,
    private readonly jobId: string,
  ) {}

  mount(main: HTMLElement): void {
    const field = (name: string, label: string): HTMLElement[] => {
      const value = h("dd", { id: `job-${name}` });
      this.fields.set(name, value);
      return [h("dt", {}, label), value];
    };
    this.bar = h("progress", { id: "job-progress", max: 1, value: 0, "aria-labelledby": "progress-label" });
    this.cancel = h("button", { type: "button", id: "cancel-job" }, "Cancel job");
    this.cancel.addEventListener("click", () => void this.actions.cancel(this.jobId));
    this.failure = h("div", { id: "job-failure" });
    this.errorBox = h("div", { id: "job-error", hidden: true });
    this.output = h("pre", { id: "job-output", class: "output", tabindex: 0, "aria-labelledby": "result-title" });
    this.resultBox = h(
      "section",
      { id: "job-result", hidden: true, "aria-labelledby": "result-title" },
      h("h2", { id: "result-title" }, "Result"),
      this.output,
    );
    this.streamText = h("pre", { id: "job-stream", class: "output", tabindex: 0, "aria-labelledby": "stream-title" });
    this.streamNote = h("p", { id: "job-stream-note", class: "help", role: "status" });
    this.streamBox = h(
      "section",
      { id: "job-stream-box", hidden: true, "aria-labelledby": "stream-title", "aria-live": "off" },
      h("h2", { id: "stream-title" }, "Output"),
      this.streamNote,
      this.streamText,
    );
    main.replaceChildren(
      h(
        "section",
        { "aria-labelledby": "job-title" },
        h("p", {}, h("a", { href: "#/jobs" }, "Back to my jobs")),
        h("h1", { id: "job-title" }, `Job ${this.jobId.slice(0, 8)}`),
        this.failure,
        h(
          "dl",
          { class: "facts" },
          ...field("status", "Status"),
          ...field("operation", "Operation"),
          ...field("attempts", "Attempts"),
          ...field("created", "Submitted"),
          ...field("updated", "Updated"),
          ...field("usage", "Tokens"),
          ...field("id", "Job id"),
        ),
        h(
          "div",
          { class: "progress-row" },
          h("span", { id: "progress-label" }, "Progress"),
          this.bar,
          h("span", { id: "job-steps" }),
        ),
        this.errorBox,
        this.cancel,
        this.streamBox,
        this.resultBox,
      ),
    );
  }

  render(state: State): void {
    const job = state.jobs.get(this.jobId);
    const { detail } = state;
    const failures = [detail.failure, detail.cancelFailure, detail.resultFailure].filter((f) => f !== null);
    this.failure?.replaceChildren(...failures.map((f) => failureBox(f)));
    if (job === undefined || this.bar === null || this.cancel === null) {
      if (this.cancel !== null) {
        this.cancel.hidden = true;
      }
      return;
    }
    const set = (name: string, text: string): void => {
      const element = this.fields.get(name);
      if (element !== undefined) {
        setText(element, text);
      }
    };
    set("status", statusLabel(job.status));
    set("operation", job.operation);
    set("attempts", String(job.attempts));
    set("created", formatTime(job.createdAt));
    set("updated", formatTime(job.updatedAt));
    set("usage", job.usage === null ? "none yet" : `${job.usage.inputTokens} in, ${job.usage.outputTokens} out`);
    set("id", job.jobId);
    const { completedSteps, totalSteps } = job.progress;
    this.bar.max = Math.max(totalSteps, 1);
    this.bar.value = completedSteps;
    const steps = document.getElementById("job-steps");
    if (steps !== null) {
      setText(steps, `${completedSteps} of ${totalSteps} steps`);
    }
    this.cancel.hidden = TERMINAL.has(job.status);
    this.cancel.disabled = detail.cancelling || job.status === "CancellationRequested";
    setText(this.cancel, job.status === "CancellationRequested" ? "Cancellation requested" : "Cancel job");
    if (this.errorBox !== null) {
      this.errorBox.hidden = job.error === null;
      if (job.error !== null) {
        this.errorBox.replaceChildren(
          failureBox({ title: `Failed: ${job.error.code}`, detail: job.error.message }, "job-error-message"),
        );
      }
    }
    if (this.resultBox !== null && this.output !== null) {
      this.resultBox.hidden = detail.result === null || job.stream;
      // An extract job's output is a JSON object: shown indented, as the CLI prints it.
      setText(this.output, detail.result === null ? "" : formatOutput(detail.result.output));
    }
    if (this.streamBox !== null && this.streamText !== null && this.streamNote !== null) {
      this.streamBox.hidden = !job.stream;
      setText(this.streamText, detail.output.text());
      const attempt = detail.output.shownAttempt;
      setText(
        this.streamNote,
        detail.outputComplete
          ? "Complete."
          : attempt === null
            ? "Waiting for the first words..."
            : `Being written${attempt > 1 ? ` (attempt ${attempt}: an earlier one was cut short)` : ""}...`,
      );
    }
  }

  unmount(): void {
    this.streamBox = null;
    this.streamText = null;
    this.streamNote = null;
    this.fields = new Map();
    this.bar = null;
    this.cancel = null;
  }
}
