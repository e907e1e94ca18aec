"""The PNGs: replicas, queue latency and depth over time, one column per class; policies as lines or as rows."""

import matplotlib

matplotlib.use("Agg")  # files only: no display on servers or in CI

import matplotlib.pyplot as plt
import numpy as np

from .traces import CLASSES

COLOURS = {
    "windowed_latency": "tab:blue",
    "windowed_scheduled": "tab:green",
    "instant_depth": "tab:orange",
    "fixed_peak": "tab:grey",
}


def _downsample(values, seconds_per_point):
    """Per-second values as the max of each bucket, so short peaks stay visible in long traces."""
    if seconds_per_point <= 1:
        return values
    usable = len(values) // seconds_per_point * seconds_per_point
    return values[:usable].reshape(-1, seconds_per_point).max(axis=1)


def _time_axis(seconds):
    step = max(1, seconds // 2000)
    unit, scale = ("h", 3600.0) if seconds > 4 * 3600 else ("min", 60.0)
    return step, unit, scale


def _mark(axes, marks, scale):
    """A dotted line at each second of ``marks``: the first reserved second of each spike of scheduled sends."""
    for second in marks:
        for ax in axes:
            ax.axvline(second / scale, color="grey", linestyle=":", linewidth=0.8)


def plot(runs, scaling, path, title, marks=None):
    """Write the plot of ``runs`` (``{policy: {class: ClassRun}}``) to ``path``; ``marks`` are ``{class: [second]}``
    to mark (each spike of scheduled sends)."""
    seconds = len(next(iter(runs.values()))["routine"].replicas)
    step, unit, scale = _time_axis(seconds)
    fig, axes = plt.subplots(3, len(CLASSES), figsize=(15, 9), sharex=True, squeeze=False)
    for col, klass in enumerate(CLASSES):
        target = scaling.classes[klass].target
        for policy, by_class in runs.items():
            run = by_class[klass]
            x = np.arange(0, len(run.replicas) // step * step, step) / scale
            kwargs = {"color": COLOURS.get(policy), "linewidth": 0.9, "label": policy}
            axes[0][col].step(x, _downsample(run.replicas, step), where="post", **kwargs)
            axes[1][col].plot(x, _downsample(run.latency, step), **kwargs)
            axes[2][col].plot(x, _downsample(run.depth, step), **kwargs)
        _mark([axes[row][col] for row in range(3)], (marks or {}).get(klass, ()), scale)
        axes[0][col].set_title(f"{klass} (target {target:g} s)")
        axes[1][col].axhline(target, color="red", linestyle="--", linewidth=0.8, label="target")
        axes[2][col].set_xlabel(f"time ({unit})")
    for row, label in enumerate(("replicas", "queue latency (s)", "queue depth")):
        axes[row][0].set_ylabel(label)
    axes[0][0].legend(loc="upper left", fontsize="small")
    axes[1][0].legend(loc="upper left", fontsize="small")
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def plot_day(runs, scaling, path, title):
    """One day per policy: a row of replicas and a row of queue latency for each, one column per class.

    Rows instead of overlaid lines, so that each policy's scale-ups and scale-downs stay readable.
    """
    seconds = len(next(iter(runs.values()))["routine"].replicas)
    step, unit, scale = _time_axis(seconds)
    rows = 2 * len(runs)
    fig, axes = plt.subplots(rows, len(CLASSES), figsize=(15, 2.1 * rows + 1), sharex=True, squeeze=False)
    for col, klass in enumerate(CLASSES):
        target = scaling.classes[klass].target
        top = max(int(by_class[klass].replicas.max()) for by_class in runs.values()) + 1
        for i, (policy, by_class) in enumerate(runs.items()):
            run, colour = by_class[klass], COLOURS.get(policy)
            x = np.arange(0, len(run.replicas) // step * step, step) / scale
            replicas, latency = axes[2 * i][col], axes[2 * i + 1][col]
            replicas.step(x, _downsample(run.replicas, step), where="post", color=colour, linewidth=0.9)
            replicas.set_ylim(0, top)
            latency.plot(x, _downsample(run.latency, step), color=colour, linewidth=0.9)
            latency.axhline(target, color="red", linestyle="--", linewidth=0.8)
            replicas.set_title(f"{klass}: {policy} ({run.flaps} flaps, p99 {run.p99_s:.3g} s)", fontsize="small")
            if col == 0:
                replicas.set_ylabel("replicas")
                latency.set_ylabel("latency (s)")
        axes[-1][col].set_xlabel(f"time ({unit})")
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)
    return path
