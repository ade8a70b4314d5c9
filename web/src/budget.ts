// The tenant's token budget in the header (DESIGN.md, "Web console": budget left), from
// GET /v1/budget. It is read after sign-in and again whenever the jobs the console knows change in
// a way that moves the budget: a new job (its submit reserved tokens) or a job that ended (the
// notifier settles the run before it pushes the change, so the next read already shows it).
import { type Api, type BudgetDocument, type StatusDocument, TERMINAL } from "./api/client";
import { formatTime, h } from "./dom";

// Several pushes often arrive together (a batch of jobs ending): one read for all of them.
const SETTLE_MS = 400;

function tokens(n: number): string {
  return n.toLocaleString("en-US");
}

/** What the header says, and the longer account a screen reader or a hover gets. */
export function budgetText(budget: BudgetDocument): { short: string; long: string } {
  if (budget.limitTokens === null || budget.remainingTokens === null) {
    // Without a limit nothing reserves or settles (no budget writes at all), so usedTokens counts
    // nothing: saying "0 used" would be false. Each job's own usage is on its screen.
    return {
      short: "No monthly token limit",
      long: `No token limit for ${budget.period}: this tenant's tokens are not metered against a budget; each job shows the tokens it used.`,
    };
  }
  const reserved = budget.reservedTokens > 0 ? `, ${tokens(budget.reservedTokens)} held by running jobs` : "";
  const resets = `resets ${formatTime(budget.resetsAt)}`;
  return {
    short: `${tokens(budget.remainingTokens)} of ${tokens(budget.limitTokens)} tokens left`,
    long:
      `Token budget for ${budget.period}: ${tokens(budget.remainingTokens)} of ` +
      `${tokens(budget.limitTokens)} left, ${tokens(budget.usedTokens)} used${reserved}; ${resets}.`,
  };
}

export class BudgetPanel {
  private seen = "";
  private timer: number | null = null;
  // Answers may come back out of order: only the newest read's is shown.
  private reads = 0;

  constructor(
    private readonly slot: HTMLElement,
    private readonly api: Api,
  ) {}

  /** Read the budget now (after sign-in). */
  refresh(): void {
    if (this.timer !== null) {
      window.clearTimeout(this.timer);
      this.timer = null;
    }
    const read = ++this.reads;
    void this.api.budget().then((outcome) => {
      if (read !== this.reads) {
        return;
      }
      if (!outcome.ok) {
        // The budget is information, not a control: when it cannot be read, it is not shown.
        this.slot.hidden = true;
        return;
      }
      const text = budgetText(outcome.data);
      this.slot.replaceChildren(h("span", { id: "budget-left" }, text.short));
      this.slot.title = text.long;
      this.slot.setAttribute("aria-label", text.long);
      this.slot.dataset["remaining"] = String(outcome.data.remainingTokens ?? "none");
      this.slot.hidden = false;
    });
  }

  /** Read it again, shortly, when a job appeared or ended since the last look. */
  follow(jobs: ReadonlyMap<string, StatusDocument>): void {
    let ended = 0;
    for (const job of jobs.values()) {
      if (TERMINAL.has(job.status)) {
        ended += 1;
      }
    }
    const signature = `${jobs.size}:${ended}`;
    if (signature === this.seen) {
      return;
    }
    const first = this.seen === "";
    this.seen = signature;
    if (first || this.timer !== null) {
      return;
    }
    this.timer = window.setTimeout(() => this.refresh(), SETTLE_MS);
  }

  /** Signed out: nothing of the tenant's stays on screen. */
  hide(): void {
    if (this.timer !== null) {
      window.clearTimeout(this.timer);
      this.timer = null;
    }
    this.reads += 1;
    this.seen = "";
    this.slot.hidden = true;
    this.slot.replaceChildren();
    this.slot.removeAttribute("title");
    this.slot.removeAttribute("aria-label");
  }
}
