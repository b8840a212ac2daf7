"""Seconds against rows for each backend, from the table ``benchmarks/scale.py`` printed.

    python benchmarks/plot_scale.py benchmarks/output/scale.md doc/images/scaling.png

The first argument is a file holding the table's lines (``| n | backend | seconds | ...``).
"""

import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main(table, figure):
    rows = {}
    for line in open(table):
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 3 or not cells[0][:1].isdigit():
            continue
        rows.setdefault(cells[1], []).append((float(cells[0]), float(cells[2])))
    fig, ax = plt.subplots(figsize=(6, 4))
    for backend, points in rows.items():
        points.sort()
        ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=backend)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("rows (100 columns)")
    ax.set_ylabel("seconds per fit")
    ax.set_title("Superquantile classifier, certified Newton fit")
    ax.legend()
    fig.tight_layout()
    fig.savefig(figure, dpi=100)


if __name__ == "__main__":
    main(*sys.argv[1:3])
