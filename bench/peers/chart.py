"""Chart of a benchmark results JSON (written by bench/cli.ts): throughput and p99 latency,
median bars with min-max whiskers. Runs in bench/.venv (matplotlib).

    bench/.venv/bin/python bench/peers/chart.py bench/results/<date>.json bench/results/<date>.svg
"""

import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.ticker  # noqa: E402,F401


def spread(vals):
    xs = sorted(v for v in vals if v is not None)
    if not xs:
        return None
    n = len(xs)
    med = xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2
    return med, xs[0], xs[-1]


def main() -> None:
    src, dst = sys.argv[1], sys.argv[2:]
    data = json.load(open(src))
    rows = [c for c in data["contenders"] if not c.get("unavailable")]
    unavailable = [c["name"] for c in data["contenders"] if c.get("unavailable")]
    fig, axes = plt.subplots(1, 2, figsize=(12, 0.6 * max(4, len(rows)) + 1.8))
    for ax, key, title, unit in (
        (axes[0], "throughput", "Throughput (input records/s, higher is better)", "records/s"),
        (axes[1], "p99", f"p99 end-to-end latency at {data['meta']['rate']:,} rec/s (lower is better)", "ms"),
    ):
        names, meds, lo, hi, colors = [], [], [], [], []
        for c in rows:
            s = spread([r.get(key) for r in c["runs"]])
            if s is None:
                continue
            names.append(c["name"])
            meds.append(s[0])
            lo.append(s[0] - s[1])
            hi.append(s[2] - s[0])
            colors.append("#999999" if c.get("ceiling") else ("#d1495b" if c["name"].startswith("skein") else "#30638e"))
        y = list(range(len(names)))
        ax.barh(y, meds, xerr=[lo, hi], color=colors, capsize=4)
        ax.set_yticks(y, names)
        ax.invert_yaxis()
        ax.set_title(title, fontsize=10)
        ax.set_xlabel(unit)
        log = bool(meds) and min(meds) > 0 and max(m + h for m, h in zip(meds, hi)) / min(meds) > 20
        if log:
            ax.set_xscale("log")
        ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _p: f"{v:,.0f}" if v >= 1 else f"{v:g}"))
        for yi, m, h in zip(y, meds, hi):
            ax.text((m + h) * (1.15 if log else 1.02), yi, f"{m:,.0f}" if m >= 10 else f"{m:.1f}", va="center", fontsize=8)
        if meds:
            right = max(m + h for m, h in zip(meds, hi))
            ax.set_xlim(right=right * (4 if log else 1.18))
        if log:
            ax.set_xlabel(f"{unit} (log scale)")
        ax.grid(axis="x", alpha=0.3)
    m = data["meta"]
    sub = (
        f"{m['records']:,} records, {m['partitions']} partitions, {m['keys']:,} keys, {m['runs']} run(s), "
        f"median with min-max; {m['date']}"
    )
    if unavailable:
        sub += "\nnot run: " + ", ".join(unavailable)
    fig.suptitle("Skein benchmark: stateful per-key count\n" + sub, fontsize=10)
    fig.tight_layout()
    for d in dst:
        fig.savefig(d)


if __name__ == "__main__":
    main()
