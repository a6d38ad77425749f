"""Results as a table, as JSON (a list of records plus a .meta.json beside it), as BENCHMARKS.md and as a plot."""

from __future__ import annotations

import json
import math
import os

from .workloads import CONTENDERS, GIB, MIB, WORKLOADS, arrays

CHECK_RTOL = (
    1e-2  # float32 sums over millions of elements in different orders differ in the 4th digit
)

METHOD = f"""\
- The out-of-core contenders run in rounds (`--repeat`, 2 by default), each round in the reverse order
  of the one before, and the table shows each one's median time (with two rounds, their mean;
  `seconds_runs` in results.json has every round): the shared disk's speed drifts by tens of percent
  over minutes, and this gives every contender the same share of it. In-memory contenders run once.
- Each contender runs in a fresh child process (`python -m bench.run_one`), so its peak RSS (VmHWM) and
  its bytes read and written (`/proc/<pid>/io` read_bytes/write_bytes, all threads) are its own. Bytes
  are counted over the timed part only; peak RSS is the process's, setup included.
- Input files (and state files from the warm-up steps) are evicted from the page cache before each timed run
  (`os.fsync`, then `os.posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED)`); the child then checks with
  `mincore` that none of their pages is still cached (the Check column flags it otherwise).
- Outputs count as written when they are on disk: every contender's output files are flushed and
  `fsync`ed inside the timed part.
- `jax.jit` programs (Jask and in-memory JAX) are lowered and compiled before timing: compilation is
  excluded. W5 times the third step of a training loop (`opt.update` and `optax.apply_updates` in one
  jitted function), as a loop runs after its first steps: the first compiles and creates the
  optimizer state, the second is the first whose outputs can overwrite files an earlier step
  wrote (NumPy updates m and v in place; Jask writes into the files freed by the step before;
  Dask writes new files every step). All contenders take the same two steps first.
- Limit: the least time the workload's minimal traffic takes at the disk bandwidths measured with
  direct I/O (bytes read / read bandwidth + bytes written / write bandwidth, one disk), or its flops at
  the in-memory float32 matmul rate, whichever is larger; each rate is the best measured (the disk
  before and after the workloads). "of limit" is limit time / measured time; on a shared disk whose
  bandwidth varies, above 100% means the disk was faster during that run than in either probe.
  Throughput counts the minimal traffic (GB/s) or the flops (GFLOP/s), not the bytes a contender moved.
- In-memory contenders load their inputs before timing and write nothing: they are the compute ceiling,
  not I/O contenders, and are skipped when the inputs exceed a third of RAM.
- NumPy: `np.load(path, mmap_mode="r")`, loops over leading-axis chunks of budget / 4 (budget / 8 in
  W5; W3 multiplies column blocks of w of budget / 2 by row blocks of x), sums in float64, outputs
  through `open_memmap` chunk by chunk. Dask: chunks of budget / 8 (two worker threads), threaded
  scheduler, outputs with `da.store` into `open_memmap`; W4's gradients and W5's update written out
  by hand (Dask has no autodiff).
- W1s and W1z are W1 over the same x and y as two tensors of one safetensors file (written by
  `jask.save_safetensors`) and as two arrays of a Zarr v3 group (written by zarr-python, zstd level 1,
  chunks of whole rows of 4 MiB, budget / 8 under a smaller budget); these files are generated once
  and reused. Their minimal traffic is the bytes of these files, the compressed chunks for W1z.
  Jask: `jask.open_safetensors` / `jask.open_zarr` in the same jitted function as W1. NumPy:
  `numpy.memmap` of each tensor at the offsets its safetensors header gives, W1's loop. zarr-python:
  slabs of whole chunks of budget / 4 read with `zarr.open_group(...)[name][i:j]`, W1's NumPy loop.
  Dask: `dask.array.from_zarr` (one task per zarr chunk), threaded scheduler.
- Check: a few numbers from each result (loss, norms of sampled elements) compared with the NumPy
  contender's, relative tolerance {CHECK_RTOL}.
"""


def compare(records: list[dict]) -> None:
    """Adds vs_jask (time / Jask's time) and check_rel_diff (against NumPy's check, else Jask's)."""
    groups: dict[tuple, list[dict]] = {}
    for r in records:
        groups.setdefault((r["workload"], r["size_bytes"]), []).append(r)
    for group in groups.values():
        by_name = {r["contender"]: r for r in group}
        jask = by_name.get("jask", {}).get("seconds")
        reference = next(
            (
                by_name[c]["check"]
                for c in ("numpy", "jask", *by_name)
                if by_name.get(c, {}).get("check")
            ),
            None,
        )
        for r in group:
            r["vs_jask"] = r["seconds"] / jask if r["seconds"] and jask else None
            r["check_rel_diff"] = (
                _rel_diff(r["check"], reference) if r["check"] and reference else None
            )


def _rel_diff(values, reference) -> float:
    return max(abs(a - b) / max(abs(b), 1e-30) for a, b in zip(values, reference))


def _fmt(value, spec: str, missing: str = "-") -> str:
    return missing if value is None else format(value, spec)


def _check(r: dict) -> str:
    if r.get("cached_fraction"):
        return f"{100 * r['cached_fraction']:.0f}% cached!"
    if r["check_rel_diff"] is None:
        return "-"
    return "ok" if r["check_rel_diff"] <= CHECK_RTOL else f"differs {r['check_rel_diff']:.0e}"


HEADER = [
    "Workload",
    "Input",
    "Contender",
    "Time (s)",
    "Throughput",
    "of limit",
    "Peak RSS (MiB)",
    "Read (MiB)",
    "Written (MiB)",
    "Time / Jask",
    "Check",
]


def rows(records: list[dict]) -> list[list[str]]:
    out = []
    for r in records:
        if r["seconds"] is None:
            why = r["error"] or r["note"]
            out.append(
                [r["workload"], f"{r['size_bytes'] / GIB:g} GiB", r["contender_name"], why]
                + [""] * 7
            )
            continue
        out.append(
            [
                r["workload"],
                f"{r['size_bytes'] / GIB:g} GiB",
                r["contender_name"] + (" *" if r["note"] else ""),
                f"{r['seconds']:.2f}",
                f"{r['throughput']:.2f} {r['unit']}",
                _fmt(r["limit_fraction"], ".0%"),
                f"{r['peak_rss_bytes'] / MIB:.0f}",
                f"{r['read_bytes'] / MIB:.0f}",
                f"{r['written_bytes'] / MIB:.0f}",
                _fmt(r["vs_jask"], ".2f"),
                _check(r),
            ]
        )
    return out


def text_table(records: list[dict]) -> str:
    table = [HEADER] + rows(records)
    widths = [
        max(len(row[i]) for row in table if len(row) > i and row[4]) for i in range(len(HEADER))
    ]
    lines = []
    for row in table:
        if not row[4] and row is not HEADER:  # a skipped or failed run: its reason spans the row
            lines.append("  ".join(c.ljust(w) for c, w in zip(row[:3], widths)) + "  " + row[3])
        else:
            lines.append(
                "  ".join(
                    c.rjust(w) if i >= 3 else c.ljust(w)
                    for i, (c, w) in enumerate(zip(row, widths))
                )
            )
    return "\n".join(lines)


def markdown_table(records: list[dict]) -> str:
    lines = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    lines += ["| " + " | ".join(row) + " |" for row in rows(records)]
    return "\n".join(lines)


def profile_table(records: list[dict]) -> str:
    """Jask's time per pipeline stage (busy seconds, summed over its ops) against its wall time."""
    lines = [
        "| Workload | Input | Wall, that round (s) | Pipelines (s) | Read busy (s) "
        "| Compute busy (s) | Write busy (s) |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in records:
        stages = r.get("jask_stage_seconds")
        if r["contender"] != "jask" or not stages or r["seconds"] is None:
            continue
        wall = r.get("measured_run_seconds") or r["seconds"]
        lines.append(
            f"| {r['workload']} | {r['size_bytes'] / GIB:g} GiB | {wall:.2f} | {stages['span']:.2f} | "
            f"{stages['read']:.2f} | {stages['compute']:.2f} | {stages['write']:.2f} |"
        )
    return "\n".join(lines) if len(lines) > 2 else ""


def decode_table(records: list[dict]) -> str:
    """Compressed inputs: each contender's rate in decoded bytes against one core's decode rate."""
    lines = [
        "| Workload | Input | Stored | One core decodes | Contender | Decoded GB/s | Of one core |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in records:
        if not r.get("decode_bps") or r["seconds"] is None:
            continue
        rate = r["decoded_bytes"] / r["seconds"]
        lines.append(
            f"| {r['workload']} | {r['size_bytes'] / GIB:g} GiB | {r['stored_ratio']:.2f}x smaller "
            f"| {_gb(r['decode_bps'])} | {r['contender_name']} | {rate / 1e9:.2f} "
            f"| {rate / r['decode_bps']:.0%} |"
        )
    return "\n".join(lines) if len(lines) > 2 else ""


def _decode_section(records: list[dict]) -> str:
    table = decode_table(records)
    if not table:
        return ""
    return (
        "\nCompressed inputs: the table above counts the bytes read from the disk (the compressed "
        "chunks); here each contender's rate in decoded bytes (x and y in memory) against the rate "
        "one core decodes the same chunks with `numcodecs.Zstd` (8 chunks of x, best of 5, "
        "measured in this run). Above 100% means the contender decoded on more than one core.\n\n"
        + table
        + "\n"
    )


def meta_path(path: str) -> str:
    return os.path.splitext(path)[0] + ".meta.json"


def save(path: str, records: list[dict], meta: dict) -> None:
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        json.dump(records, f, indent=1)
    with open(meta_path(path), "w") as f:
        json.dump(meta, f, indent=1)


def load(path: str) -> tuple[list[dict], dict] | None:
    if not (os.path.exists(path) and os.path.exists(meta_path(path))):
        return None
    with open(path) as f, open(meta_path(path)) as g:
        return json.load(f), json.load(g)


def _gb(bps: float) -> str:
    return f"{bps / 1e9:.2f} GB/s"


def _machine(meta: dict) -> str:
    m, lim = meta["machine"], meta["limits"]
    versions = ", ".join(f"{k} {v}" for k, v in m["versions"].items())
    return (
        f"- Machine: {m['cpu']}, {m['cores']} cores, {m['ram_bytes'] / GIB:.0f} GiB RAM, Linux {m['kernel']}; "
        f"load average {m['load_average']:.1f} at the start, {meta['load_average_end']:.1f} at the end "
        f"(other processes share this machine)\n"
        f"- Data folder: `{m['data_dir']}` on {m['filesystem']}, {m['device']}\n"
        f"- Disk, direct I/O, 16 MiB requests on a {lim['probe_bytes'] / MIB:g} MiB file, best of before and "
        f"after the workloads: read {_gb(lim['read_bps'])} ({_gb(lim['read_bps_before'])}, "
        f"{_gb(lim['read_bps_after'])}), write {_gb(lim['write_bps'])} ({_gb(lim['write_bps_before'])}, "
        f"{_gb(lim['write_bps_after'])})\n"
        f"- In-memory float32 matmul: {lim['matmul_flops'] / 1e9:.1f} GFLOP/s, the best of NumPy's "
        f"({lim['numpy_matmul_flops'] / 1e9:.1f} GFLOP/s on {lim['matmul_side']}^3) and the in-memory W3 runs\n"
        f"- Versions: {versions}; Jask commit {m['commit']}\n"
        f"- Run on {m['date']}, {meta['seconds'] / 60:.1f} minutes in all"
    )


def _shapes(size: int, budget: int, names) -> str:
    plan = arrays(size, budget)
    lines = []
    for name in names:
        wl = WORKLOADS[name]
        inputs = ", ".join(f"{n} {plan[n].shape}" for n in wl.inputs)
        lines.append(f"- {name}, {wl.title}: {inputs}")
    return "\n".join(lines)


def _section(title: str, records: list[dict], meta: dict) -> str:
    sizes = sorted({r["size_bytes"] for r in records})
    names = sorted({r["workload"] for r in records})
    return (
        f"## {title}\n\n`{meta['command']}`\n\n{_machine(meta)}\n"
        f"- Budget {meta['budget_bytes'] / MIB:g} MiB; input size "
        f"{', '.join(f'{s / GIB:g}' for s in sizes)} GiB (bytes of each large input)\n\n"
        f"Shapes at {sizes[-1] / GIB:g} GiB:\n\n{_shapes(sizes[-1], meta['budget_bytes'], names)}\n\n"
        f"{markdown_table(records)}\n\n"
        f"`*` in memory: inputs loaded before timing, nothing written (the compute ceiling).\n"
        + _decode_section(records)
        + _profile_section(records)
    )


def _profile_section(records: list[dict]) -> str:
    table = profile_table(records)
    if not table:
        return ""
    return (
        "\nWhere Jask's time goes (`jask._engine.pipeline_stage_seconds()` around the timed part of the "
        "round nearest the median): "
        "seconds its block pipelines ran (from first read to last write) and each stage was busy. "
        "Stages overlap, so a stage busy for about the whole span is the bound; compute busy "
        "longer than the same op takes in memory means I/O took CPU from it.\n\n" + table + "\n"
    )


def write_markdown(path: str, main, scaling, plot_file: str | None) -> None:
    """BENCHMARKS.md from the latest default run and the latest sweep, each (records, meta) or None."""
    parts = [
        "# Benchmarks\n",
        "Written by `python -m bench` (see `bench/`); rerun it rather than editing this file.\n",
        "## Method\n",
        METHOD,
    ]
    if main:
        parts.append(_section("Results", *main))
    parts.append("## Scaling\n")
    parts.append(
        "Time against bytes moved (W1, W2) and flops (W3) at a fixed budget, and peak memory, from\n\n"
        "    python -m bench --scale 0.5,1,2,4,8\n\n"
        "(W1, W2 and W3 at each input size; expect half an hour or more on two cores, and about 30 GiB of free disk).\n"
    )
    if scaling:
        if plot_file:
            relative = os.path.relpath(plot_file, os.path.dirname(os.path.abspath(path)))
            parts.append(f"![time and peak RSS against size]({relative})\n")
        parts.append(_section("Scaling sweep", *scaling).replace("## Scaling sweep", "### Sweep"))
    else:
        parts.append("No sweep has been run yet.\n")
    with open(path, "w") as f:
        f.write("\n".join(parts))


def _tick(value: float, _) -> str:
    """Log-axis labels at 1, 2 and 5 times powers of ten only, written plainly."""
    if value <= 0:
        return ""
    lead = round(value / 10 ** math.floor(math.log10(value)), 6)
    return f"{value:g}" if lead in (1, 2, 5) else ""


def plot(records: list[dict], path: str) -> None:
    """Time against GB moved (W1, W2) and GFLOP (W3), with the limit dashed; peak RSS against input size."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter

    plain = FuncFormatter(_tick)

    done = [r for r in records if r["seconds"] is not None]
    panels = [(w, "GB read + written", "data_bytes") for w in ("W1", "W2")] + [
        ("W3", "GFLOP", "flops")
    ]
    fig, axes = plt.subplots(2, 2, figsize=(11, 8))
    for ax, (name, label, key) in zip(axes.flat, panels):
        if not any(r["workload"] == name for r in done):
            ax.set_visible(False)
            continue
        for contender, title in CONTENDERS.items():
            points = sorted(
                (r[key] / 1e9, r["seconds"])
                for r in done
                if r["workload"] == name and r["contender"] == contender
            )
            if points:
                ax.plot(*zip(*points), marker="o", label=title)
        limit = sorted(
            {
                (r[key] / 1e9, r["limit_seconds"])
                for r in done
                if r["workload"] == name and r["contender"] == "jask" and r["limit_seconds"]
            }
        )
        if limit:
            ax.plot(*zip(*limit), "k--", label="limit")
        ax.set(
            xscale="log",
            yscale="log",
            xlabel=label,
            ylabel="seconds",
            title=f"{name}: {WORKLOADS[name].title}",
        )
        ax.legend(fontsize=7)
    ax = axes.flat[3]
    for contender, title in CONTENDERS.items():
        points = sorted(
            (r["size_bytes"] / GIB, r["peak_rss_bytes"] / MIB)
            for r in done
            if r["contender"] == contender
        )
        if points:
            ax.plot(*zip(*points), marker="o", linestyle="none", label=title)
    budgets = {r["budget_bytes"] for r in records}
    for b in budgets:
        ax.axhline(b / MIB, color="k", linestyle=":", label=f"budget {b / MIB:g} MiB")
    ax.set(
        xscale="log",
        yscale="log",
        xlabel="input size (GiB each)",
        ylabel="peak RSS (MiB)",
        title="peak RSS of the process, all workloads",
    )
    ax.legend(fontsize=7)
    for ax in axes.flat:
        for axis in (ax.xaxis, ax.yaxis):
            axis.set_major_formatter(plain)
            axis.set_minor_formatter(plain)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
