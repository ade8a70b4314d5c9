"""One console for every command: the result on stdout (its JSON document with --json, else its
human form), everything said to the person on stderr, so `> file` and `| jq` get only the result.

Tables are printed by `Console.table`: rich's table on a terminal, plain aligned columns
otherwise (pipes, logs, tests), the same rows either way.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from rich.progress import Progress as RichProgress


def plain_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """Left-aligned columns separated by two spaces; the last column is never padded."""
    widths = [max(len(str(cell)) for cell in column) for column in zip(header, *rows, strict=False)]
    lines = []
    for row in (header, *rows):
        cells = [str(cell).ljust(width) for cell, width in zip(row[:-1], widths, strict=False)]
        lines.append("  ".join([*cells, str(row[-1])]).rstrip())
    return lines


class Console:
    """Where a command's output goes."""

    def __init__(self, json_mode: bool, out: TextIO | None = None, err: TextIO | None = None) -> None:
        self.json_mode = json_mode
        self.out = out or sys.stdout
        self.err = err or sys.stderr
        self.live = self.err.isatty()  # a terminal gets updating progress lines
        self._line_width = 0  # width of the open progress line on err, 0 when none
        self.bar: RichProgress | None = None  # a multi-step job's live progress bar, while shown

    # --- to the person (stderr) -----------------------------------------------------------------

    def note(self, message: str) -> None:
        """A message for the person, never on stdout; it starts below an open progress line."""
        self.end_line()
        if self.bar is not None:
            self.bar.console.print(message, markup=False, highlight=False)  # above the live bar
            return
        print(message, file=self.err, flush=True)

    def redraw(self, line: str) -> None:
        """Overwrite the progress line (terminal only)."""
        # Pad over the previous, possibly longer line; no escape codes, so any terminal works.
        self.err.write("\r" + line.ljust(self._line_width))
        self.err.flush()
        self._line_width = max(len(line), 1)

    def end_line(self) -> None:
        """Leave the progress line as it is and move below it."""
        if self._line_width:
            print(file=self.err, flush=True)
            self._line_width = 0

    # --- the result (stdout) ---------------------------------------------------------------------

    def line(self, text: str = "") -> None:
        """A line of the result's human form, as it is made (on stderr with --json: the document
        alone is the result then)."""
        self.end_line()
        print(text, file=self.err if self.json_mode else self.out, flush=True)

    def show(self, human: str | None, document: Any) -> None:
        """The command's one result: the document with --json, else the human text (if any)."""
        self.end_line()
        if self.json_mode:
            print(json.dumps(document, indent=2), file=self.out, flush=True)
        elif human is not None:
            print(human, file=self.out, end="" if human.endswith("\n") else "\n", flush=True)

    def write(self, text: str) -> None:
        """Part of the human result as it arrives (streamed text): no newline added, flushed."""
        self.end_line()
        self.out.write(text)
        self.out.flush()

    def json_line(self, document: Any) -> None:
        """One document on its own line (JSON Lines: `watch --json`)."""
        print(json.dumps(document, separators=(",", ":")), file=self.out, flush=True)

    def table(self, header: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
        """Rows under a header, as part of the human result (never with --json)."""
        target = self.err if self.json_mode else self.out
        if target.isatty():
            from rich import box  # noqa: PLC0415
            from rich.console import Console as RichConsole  # noqa: PLC0415 - only a terminal needs it
            from rich.table import Table  # noqa: PLC0415

            table = Table(box=box.SIMPLE_HEAD, header_style="bold", pad_edge=False)
            for name in header:
                table.add_column(name, overflow="fold")  # a narrow terminal wraps an id, never cuts it
            for row in rows:
                table.add_row(*(str(cell) for cell in row))
            RichConsole(file=target, highlight=False).print(table)
            return
        for text in plain_table(header, rows):
            print(text, file=target, flush=True)
