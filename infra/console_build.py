"""The web console's build: `node web/build.mjs` (esbuild from node_modules, offline) into a
content-addressed directory, `build/console/<hash of the sources>`, shared by the CDK asset
(infra/constructs/console.py) and local mode's console front.

Content-addressed like the code asset (infra/packaging.py): an unchanged console is not built
again, and two builds at once (a synth, a local stack) never write into the same directory.
`bundle=false` (tests, local mode's synth) uses a placeholder page instead: no node needed.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import tempfile
from pathlib import Path

from infra.packaging import BUILD_DIR, PROJECT_ROOT

# What the build reads: a change to any of these is a new console.
_SOURCES = ("web/src", "web/static", "web/build.mjs", "web/tsconfig.json", "package-lock.json")
_PLACEHOLDER = (
    "<!doctype html><title>outlast console placeholder</title>"
    "<p>Synthesized without bundling (bundle=false): this stack cannot be deployed.</p>\n"
)


class ConsoleBuildError(RuntimeError):
    """The console could not be built (node or esbuild missing, or the build failed)."""


def source_files(root: Path = PROJECT_ROOT) -> list[Path]:
    """The console's sources, relative to `root`, in a stable order."""
    files: list[Path] = []
    for name in _SOURCES:
        path = root / name
        found = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
        files.extend(p.relative_to(root) for p in found if p.is_file())
    return files


def source_digest(root: Path = PROJECT_ROOT) -> str:
    """A hash of every source file's path and bytes."""
    digest = hashlib.sha256()
    for relative in source_files(root):
        digest.update(relative.as_posix().encode() + b"\0" + (root / relative).read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def build_console(build_dir: Path = BUILD_DIR, root: Path = PROJECT_ROOT) -> Path:
    """The built console (index.html, main.js, main.css...), built now unless this source already was."""
    target = build_dir / "console" / source_digest(root)
    if (target / "index.html").is_file():
        return target
    node = shutil.which("node")
    if node is None or not (root / "node_modules" / ".bin" / "esbuild").exists():
        raise ConsoleBuildError("the console needs node and esbuild: run `npm ci` (or `make node`) first")
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".console-", dir=target.parent))
    try:
        _run_build(node, root, staging)
        try:
            staging.rename(target)
        except OSError:  # another build of the same sources finished first; it is identical
            shutil.rmtree(staging, ignore_errors=True)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return target


def _run_build(node: str, root: Path, outdir: Path) -> None:
    result = subprocess.run(  # noqa: S603 - node from PATH, our own build script
        [node, str(root / "web" / "build.mjs"), str(outdir)],
        cwd=root,
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        raise ConsoleBuildError(f"the console build failed:\n{result.stderr.strip()}")


def placeholder(build_dir: Path = BUILD_DIR) -> Path:
    """A one-page stand-in for synths that do not bundle (tests, local mode)."""
    path = build_dir / "console-placeholder"
    page = path / "index.html"
    if not page.is_file() or page.read_text() != _PLACEHOLDER:
        path.mkdir(parents=True, exist_ok=True)
        page.write_text(_PLACEHOLDER)
    return path
