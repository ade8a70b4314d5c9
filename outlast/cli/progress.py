"""What `--wait` shows while it waits: one updating line on a terminal (rich's progress bar for a
job planned in steps), a plain line per change otherwise (logs and pipes)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from outlast.api.http import JsonObject
from outlast.api.models import StatusDocument
from outlast.cli.console import Console
from outlast.cli.formats import progress_line, steps_of

if TYPE_CHECKING:
    from rich.progress import Progress as RichProgress
    from rich.progress import TaskID


class Progress:
    """The --wait display (an outlast.follow.Display)."""

    def __init__(self, console: Console, job_id: str) -> None:
        self._console = console
        self._job_id = job_id
        self._started = time.monotonic()
        self._document: StatusDocument | None = None
        self._last_plain: tuple[str, int, tuple[int, int] | None] | None = None
        self._task: TaskID | None = None

    def elapsed(self) -> float:
        """Seconds since the wait began."""
        return time.monotonic() - self._started

    def update(self, document: StatusDocument, body: JsonObject) -> None:
        """Show a fresh status document."""
        self._document = document
        if self._console.live:
            self._draw()
            return
        # Logs and pipes get a line only when something changed, not one per poll.
        state = (document.status, document.attempts, steps_of(document))
        if state != self._last_plain:
            self._last_plain = state
            self._console.note(progress_line(self._job_id, document, self.elapsed()))

    def pause(self, seconds: float) -> None:
        """Sleep at least `seconds`, ticking the elapsed time on a terminal."""
        end = time.monotonic() + seconds
        while (left := end - time.monotonic()) > 0:
            time.sleep(min(1.0, left))
            if self._console.live:
                self._draw()

    def tick(self) -> None:
        """Redraw the elapsed time on a terminal (nothing elsewhere)."""
        if self._console.live:
            self._draw()

    def close(self) -> None:
        """Keep the last progress line (or bar) and move below it."""
        bar = self._console.bar
        if bar is not None:
            bar.refresh()
            bar.stop()
            self._console.bar = None
        self._console.end_line()

    def _draw(self) -> None:
        steps = steps_of(self._document)
        if steps is None and self._console.bar is None:
            self._console.redraw(progress_line(self._job_id, self._document, self.elapsed()))
            return
        bar = self._console.bar or self._open_bar()
        completed, total = steps or (0, 1)
        status = self._document.status if self._document else "waiting"
        if self._task is not None:
            bar.update(self._task, completed=completed, total=total, status=status)
        bar.refresh()

    def _open_bar(self) -> RichProgress:
        """A multi-step job: rich's progress bar takes over the line (loaded only for such a job)."""
        from rich.console import Console as RichConsole  # noqa: PLC0415 - only a multi-step wait needs it
        from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn  # noqa: PLC0415
        from rich.progress import Progress as Bar  # noqa: PLC0415

        self._console.end_line()
        bar = Bar(
            TextColumn(f"job {self._job_id}: {{task.fields[status]}}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("steps"),
            TimeElapsedColumn(),
            console=RichConsole(file=self._console.err),
            auto_refresh=False,
        )
        bar.start()
        self._task = bar.add_task("steps", total=1, status="waiting")
        self._console.bar = bar
        return bar
