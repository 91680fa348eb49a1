"""The cost plot: $ per million output tokens versus utilisation, with and without DSpark, and the API line.

matplotlib is imported inside `plot_cost` only (its Agg canvas directly: no pyplot, no display), so
importing `dspark.plan` stays light. The PNG is written atomically: rendered to a temp file in the target
folder, then renamed.
"""
from __future__ import annotations

from pathlib import Path

from dspark.files import atomic_write
from dspark.plan.errors import PlanError


def plot_cost(curve: list[tuple[float, float, float]], api_per_m: float, path: str | Path, title: str) -> Path:
    """Draw `curve` ((utilisation, $/M without, $/M with) points) and the API price; return the PNG path."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        raise PlanError("the plot needs matplotlib: pip install 'dspark[plot]'") from None
    target = Path(path)
    if target.suffix.lower() != ".png":
        raise PlanError(f"--plot writes a PNG; give a path ending in .png (got {path})")
    target.parent.mkdir(parents=True, exist_ok=True)
    util = [100 * u for u, _, _ in curve]
    fig = Figure(figsize=(7.5, 4.5), dpi=120)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    ax.plot(util, [w for _, w, _ in curve], label="self-hosted, no draft", color="#888888", linewidth=2)
    ax.plot(util, [d for _, _, d in curve], label="self-hosted, DSpark", color="#d9480f", linewidth=2)
    ax.axhline(api_per_m, color="#1c7ed6", linestyle="--", linewidth=1.5,
               label=f"API ${api_per_m:.2f} per M output (with its prompt)")
    ax.set_yscale("log")
    ax.set_xlabel("utilisation (%)")
    ax.set_ylabel("$ per million output tokens")
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="both", alpha=0.25)
    ax.legend(frameon=False)
    fig.tight_layout()
    atomic_write(target, lambda tmp: fig.savefig(tmp, format="png"))
    return target
