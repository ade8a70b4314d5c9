// A streaming job's text, put back together from its output events (DESIGN.md, "Streaming output";
// the same rules as the command line's outlast/reassembly.py). Events come from GET .../output, a
// follow's replay and live pushes, in any order and possibly twice: per attempt the contiguous
// prefix is kept and what arrives past a gap waits until the gap fills. The text shown is the
// highest attempt's (a newer attempt replaces an older one's text), or, once the job has ended, its
// result's attempt.

interface Attempt {
  pieces: string[];
  waiting: Map<number, string>;
}

export class Reassembly {
  private readonly attempts = new Map<number, Attempt>();
  private resultAttempt: number | null = null;

  /** Takes one event; true when the text shown changed. */
  add(attempt: number, seq: number, text: string): boolean {
    const shownBefore = this.shownAttempt;
    let found = this.attempts.get(attempt);
    if (found === undefined) {
      found = { pieces: [], waiting: new Map() };
      this.attempts.set(attempt, found);
    }
    if (seq < 1 || seq <= found.pieces.length || found.waiting.has(seq)) {
      return this.shownAttempt !== shownBefore;
    }
    found.waiting.set(seq, text);
    let grew = false;
    for (let next = found.waiting.get(found.pieces.length + 1); next !== undefined; next = found.waiting.get(found.pieces.length + 1)) {
      found.waiting.delete(found.pieces.length + 1);
      found.pieces.push(next);
      grew = true;
    }
    return this.shownAttempt !== shownBefore || (grew && attempt === this.shownAttempt);
  }

  /** The job ended: show its result's attempt from now on (null: keep the highest). */
  settle(resultAttempt: number | null): void {
    this.resultAttempt = resultAttempt;
  }

  get shownAttempt(): number | null {
    if (this.resultAttempt !== null) {
      return this.resultAttempt;
    }
    let highest: number | null = null;
    for (const attempt of this.attempts.keys()) {
      highest = highest === null || attempt > highest ? attempt : highest;
    }
    return highest;
  }

  text(): string {
    const attempt = this.shownAttempt;
    return attempt === null ? "" : (this.attempts.get(attempt)?.pieces.join("") ?? "");
  }

  /** Where to resume reading: the shown attempt's last contiguous event ("0.0" before any). */
  cursor(): string {
    const attempt = this.shownAttempt;
    if (attempt === null) {
      return "0.0";
    }
    return `${attempt}.${this.attempts.get(attempt)?.pieces.length ?? 0}`;
  }
}
