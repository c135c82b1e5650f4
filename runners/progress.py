"""What one invocation of a run has done so far, and the progress bar and console that show it."""

from dataclasses import dataclass, field

from rich.console import Console
from rich.markup import escape
from rich.progress import Progress, TaskID


@dataclass
class RunProgress:
    """The executor's counters; `order_index`, the next window's place in the run, starts at `invocation`."""

    order_index: int = 0
    invocation: int = 0
    launches: int = 0
    points_stored: int = 0
    points_measured: int = 0
    overhead_s: float = 0.0
    bar: Progress | None = None
    task: TaskID | None = None
    console: Console | None = None
    warned: set[str] = field(default_factory=set)

    def next_order(self) -> int:
        order, self.order_index = self.order_index, self.order_index + 1
        return order

    def advance(self, points: int = 1) -> None:
        """`points` fewer to go (measured, failed or already stored)."""
        if points and self.bar is not None and self.task is not None:
            self.bar.update(self.task, advance=points, description="")

    def point_done(self) -> None:
        """A point's last planned repeat is stored (or it was given up)."""
        self.points_stored += 1
        self.advance()

    def describe(self, description: str) -> None:
        if self.bar is not None and self.task is not None:
            self.bar.update(self.task, description=description)

    def warn_once(self, key: str, warning: str) -> None:
        if key in self.warned:
            return
        self.warned.add(key)
        if self.console is not None:
            self.console.print(f"[bold yellow]WARNING[/]: {escape(warning)}", highlight=False)

    @property
    def overhead_s_per_point(self) -> float | None:
        return self.overhead_s / self.points_measured if self.points_measured else None
