"""Chart of a benchmark results JSON (written by bench/cli.ts): throughput, p99 latency and the
restore time (to the restored state of the same input; its changelog records/s beside each bar),
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


def restore_ms(run):
    """The run's restore time in ms; results written before restoreMs: records / rate (the same interval)."""
    if run.get("restoreMs") is not None:
        return run["restoreMs"]
    records, rate = run.get("restoreRecords"), run.get("restoreRate")
    if records is None or not rate:
        return None
    return records / rate * 1000


def main() -> None:
    src, dst = sys.argv[1], sys.argv[2:]
    data = json.load(open(src))
    rows = [c for c in data["contenders"] if not c.get("unavailable")]
    unavailable = [c["name"] for c in data["contenders"] if c.get("unavailable")]
    m = data["meta"]
    panels = [
        (lambda r: r.get("throughput"), "Throughput (input records/s, higher is better)", "records/s"),
        (lambda r: r.get("p99"), f"p99 end-to-end latency at {m['rate']:,} rec/s (lower is better)", "ms"),
    ]
    has_restore = any(restore_ms(r) is not None for c in rows for r in c["runs"])
    if has_restore:
        panels.append(
            (restore_ms, f"Restore: time to the state of the same {m['records']:,} inputs\n(lower is better; changelog records/s beside)", "ms")
        )
    fig, axes = plt.subplots(1, len(panels), figsize=(6 * len(panels), 0.6 * max(4, len(rows)) + 1.8))
    for ax, (get, title, unit) in zip(axes, panels):
        names, meds, lo, hi, colors, extra = [], [], [], [], [], []
        for c in rows:
            s = spread([get(r) for r in c["runs"]])
            if s is None:
                continue
            rate = spread([r.get("restoreRate") for r in c["runs"]]) if get is restore_ms else None
            extra.append(f"  ({rate[0]:,.0f} rec/s)" if rate is not None else "")
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
        right = max((med + h for med, h in zip(meds, hi)), default=0)
        for yi, med, h, x in zip(y, meds, hi, extra):
            at = (med + h) * 1.15 if log else med + h + right * 0.02
            ax.text(at, yi, (f"{med:,.0f}" if med >= 10 else f"{med:.1f}") + x, va="center", fontsize=8)
        if meds:
            ax.set_xlim(right=right * (4 if log else (1.6 if any(extra) else 1.18)))
        if not log:
            ax.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(5))
        if log:
            ax.set_xlabel(f"{unit} (log scale)")
        ax.grid(axis="x", alpha=0.3)
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
