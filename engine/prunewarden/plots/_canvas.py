"""The one door to matplotlib: an optional extra (``prunewarden[plot]``), imported only when a
plot is asked for, so that neither ``import prunewarden`` nor a command without ``--plot`` pays
for it.

Figures are built as :class:`matplotlib.figure.Figure` objects and saved by their own Agg canvas:
no pyplot, no global figure state, no display, so plots render the same on a headless server and
from several threads.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from prunewarden.errors import ExitCode, PrunewardenError

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

# One colour per outcome, the same in every plot.
OUTCOME_COLOURS = {
    "allow": "#2e7d32",
    "deny": "#ef6c00",
    "halt": "#c62828",
    "planned": "#1565c0",
    "frozen": "#6a1b9a",
}
SPREAD_COLOUR = "#1565c0"
FLOOR_COLOUR = "#c62828"
MEDIAN_COLOUR = "#616161"
CANARY_COLOURS = ("#ef6c00", "#8e24aa", "#00838f")
DPI = 100


class PlotError(PrunewardenError):
    """A plot cannot be drawn or written: matplotlib is missing, or the file is not writable."""

    exit_code = ExitCode.USAGE


def figure_class() -> type[Figure]:
    """matplotlib's Figure, or a :class:`PlotError` saying how to install it."""
    try:
        from matplotlib.figure import Figure  # noqa: PLC0415 - optional: only a plot needs it
    except ImportError:
        msg = "--plot needs matplotlib: pip install 'prunewarden[plot]'"
        raise PlotError(msg) from None
    return Figure


def new_figure(rows: int, *, height: float = 2.8, width: float = 11.0) -> Figure:
    return figure_class()(figsize=(width, 1.2 + height * rows), layout="constrained")


def save(figure: Figure, path: Path) -> Path:
    """Write ``figure`` as a PNG at ``path``, whole or not at all, every text as written."""
    literal_text(figure)
    scratch = path.with_name(f".{path.name}.tmp")
    try:
        figure.savefig(scratch, format="png", dpi=DPI)
        scratch.replace(path)
    except OSError as exc:
        scratch.unlink(missing_ok=True)
        raise PlotError(f"{path}: cannot write: {exc.strerror}") from None
    return path


def literal_text(figure: Figure) -> Figure:
    """Every text of ``figure`` drawn as it is written, never as mathtext.

    Titles, legends and tick labels carry what a trace or a log says (a session id, a canary's
    id, a file name), and matplotlib reads the text between two ``$`` as TeX: ``$\\frac{$``
    raised from ``savefig`` and ended the command with exit 70. No plot of ours uses mathtext,
    so it is turned off on each text rather than escaped at each place a text is made. Tick
    labels matplotlib makes while drawing copy their properties from the first tick's.
    """
    for text in figure.findobj(lambda artist: hasattr(artist, "set_parse_math")):
        text.set_parse_math(False)  # type: ignore[attr-defined]
    return figure


def prepare_folder(folder: str) -> Path:
    """The folder plots are written to, created if missing; checked before any work is done."""
    path = Path(folder)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise PlotError(f"{folder}: cannot create: {exc.strerror}") from None
    return path


def prepare_file(file: str) -> Path:
    """A plot's file: its folder created if missing; checked before any work is done."""
    path = Path(file)
    prepare_folder(str(path.parent))
    if path.is_dir():
        raise PlotError(f"{file}: is a folder; --plot takes a file name here")
    return path


def empty_panel(axes: Axes, text: str) -> None:
    """A panel with nothing to draw says so, instead of leaving a blank frame."""
    axes.text(0.5, 0.5, text, ha="center", va="center", transform=axes.transAxes, color="#616161")
    axes.set_xticks([])
    axes.set_yticks([])


def file_names(traces: list[str]) -> list[str]:
    """One PNG name per trace: its stem, numbered when two traces share one."""
    names: list[str] = []
    for trace in traces:
        stem = Path(trace).stem or "trace"
        name, n = f"{stem}.png", 2
        while name in names:
            name, n = f"{stem}-{n}.png", n + 1
        names.append(name)
    return names
