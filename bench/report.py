"""Results as a table, as JSON (a list of records plus a .meta.json beside it), as BENCHMARKS.md and as a plot."""

from __future__ import annotations

import json
import math
import os

from . import disk, targets
from .harness import CAP_RATIO, PEER_FACTOR, PEER_MIN_SECONDS, regime_text, size_text, small_data
from .targets import AT_LIMIT, PEER_MARGIN, W6_LOADER_FACTOR, W7_BOUND_FACTOR
from .workloads import CONTENDERS, GIB, MIB, WORKLOADS, arrays

CHECK_RTOL = (
    1e-2  # float32 sums over millions of elements in different orders differ in the 4th digit
)

METHOD = f"""\
- Two regimes: every workload runs uncapped, then under a memory cap (`--cap`, 1 GiB by default),
  with data (bytes read + written) {CAP_RATIO}x the cap or more; a capped row whose data is less is
  marked with its ratio. Under the cap each contender's process runs in its own cgroup
  (`bench/cgroup.py`: cgroup v2 `memory.max`, else v1 `memory.limit_in_bytes` and
  `memory.memsw.limit_in_bytes`, swap excluded), which charges the page cache the process brings in
  as well as its RSS, as a machine whose RAM the data exceeds would: the kernel reclaims cache within
  the cap and kills the process (OOM) when reclaiming does not suffice. A killed or failed contender
  stays in the table with what killed it and its peaks: the cgroup's peak charge
  (`memory.max_usage_in_bytes` / `memory.peak`) and the highest VmHWM seen while it ran (polled
  every 50 ms, so a lower bound). Every capped row gives its cgroup peak, which can be below the
  peak RSS: pages of shared libraries already in the page cache are charged to the cgroup that read
  them first, not to the contender. In-memory contenders run
  capped too: their being killed is the point.
- Each contender runs once per regime, the capped pass in the reverse contender order of the uncapped
  one, and each workload's uncapped pass in the reverse order of the last workload's, so the shared
  disk's drift (tens of percent over minutes) and its slow seconds after a probe fall on every
  contender alike (`--repeat N`: N rounds per regime, each in the reverse order of the one before, median time;
  `seconds_runs` in results.json has every round). The default run keeps within 20 minutes
  (`--minutes`): each contender run may take the time left less a reserve for every run and
  workload still to come, and a timed part of at most {PEER_FACTOR} times the fastest out-of-core
  run of the same workload so far (at least {PEER_MIN_SECONDS} s; a thrashing peer would leave the
  later workloads no time); one that overruns is recorded as timed out, never dropped.
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
- The disk probe (`bench/disk.py`, before and after the workloads, a file of up to 1 GiB beside the
  data): {disk.describe()}. Each request blocks in its own thread (`os.preadv` / `os.pwrite`
  release the GIL), so the device sees that many requests at once, into memory on huge pages as
  Jask's block buffers are (a direct request into 4 KiB pages is cut to the device's segments per
  request: 512 KiB on this machine's virtio disk, against 4 MiB into huge pages). The read limit is the better of
  direct and buffered, as a contender may use either; `--fio` also measures it with fio (direct,
  io_uring, iodepth 16 sequential and 32 random) as a reference, shown beside ours.
- Limit: the least time the workload's minimal traffic takes at the disk's limits (bytes read / read
  bandwidth + bytes written / write bandwidth, one disk; workloads that read rows at random give their
  own limit from the random-read rates), or its flops at the in-memory float32 matmul rate, whichever
  is larger. "of limit" is limit time / measured time, with the disk's rates and the matmul rate
  from the probes just before and just after the workload's pass (each regime's contenders in a
  row; a {disk.WORKLOAD_PROBE_BYTES >> 20} MiB file, one pass, and NumPy's square matmul, the
  better of the two); in brackets the same against the best rates of the whole run (every probe,
  and the in-memory W3 runs), stricter by the disk's and the CPU's drift over the run. On a
  shared disk whose bandwidth varies, above 100% means the disk was faster during that run than
  in either probe.
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
- Targets: issue 14's, judged from the run's records (`bench/targets.py`): under a cap Jask
  finishes every workload; a disk-bound workload (W6 and W7 aside) runs at {AT_LIMIT:.0%} of its limit
  or more; Jask is ahead of every out-of-core peer that finishes, by {PEER_MARGIN}x where the peer is
  under {1 / PEER_MARGIN:.0%} of its own limit (at that or more, {PEER_MARGIN}x its speed would be
  over the limit: Jask needs only to be ahead); W7 within {W7_BOUND_FACTOR}x of its bound (the larger of
  its weights over the disk's rate and its flops over the rate of its own matmuls: the same jitted
  forward pass in memory, uncapped, where that is slower than the probe's matmul rate); W6 at
  {W6_LOADER_FACTOR:g}x the NumPy loader's samples/s or at its limit.
- Check: a few numbers from each result (loss, norms of sampled elements) compared with the NumPy
  contender's, relative tolerance {CHECK_RTOL}.
"""


def compare(records: list[dict]) -> None:
    """Adds vs_jask (time / Jask's time) and check_rel_diff (against NumPy's check, else Jask's)."""
    groups: dict[tuple, list[dict]] = {}
    for r in records:
        groups.setdefault((r["workload"], r["size_bytes"], r.get("cap_bytes")), []).append(r)
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


CGROUP_HEADER = "Cgroup peak (MiB)"


def _input(r: dict) -> str:
    text = f"{r['size_bytes'] / GIB:g} GiB"
    if small_data(r):  # not the out-of-core regime: say so on the row
        text += f" (data {r['data_bytes'] / r['cap_bytes']:.1f}x cap)"
    return text


def rows(records: list[dict], capped: bool = False) -> list[list[str]]:
    """Table rows; a skipped, failed or killed run has its reason in the fourth cell and no more
    cells (under a cap, the reason names its peaks)."""
    out = []
    for r in records:
        head = [r["workload"], _input(r)]
        if r["seconds"] is None:
            out.append(head + [r["contender_name"], r["error"] or r["note"]])
            continue
        row = head + [
            r["contender_name"] + (" *" if r["note"] else ""),
            f"{r['seconds']:.2f}",
            f"{r['throughput']:.2f} {r['unit']}",
            _limit_text(r),
            f"{r['peak_rss_bytes'] / MIB:.0f}",
        ]
        if capped:
            peak = r.get("cgroup_peak_bytes")
            row.append(_fmt(peak and peak / MIB, ".0f"))
        row += [
            f"{r['read_bytes'] / MIB:.0f}",
            f"{r['written_bytes'] / MIB:.0f}",
            _fmt(r["vs_jask"], ".2f"),
            _check(r),
        ]
        out.append(row)
    return out


def _header(capped: bool) -> list[str]:
    return HEADER[:7] + [CGROUP_HEADER] + HEADER[7:] if capped else HEADER


def regimes(records: list[dict]) -> list[tuple[int | None, list[dict]]]:
    """The records by cap (None: uncapped), uncapped first."""
    caps = sorted({r.get("cap_bytes") for r in records}, key=lambda c: c or 0)
    return [(c, [r for r in records if r.get("cap_bytes") == c]) for c in caps]


def regime_title(cap: int | None) -> str:
    return f"Under a {size_text(cap)} memory cap" if cap else "Uncapped"


def text_table(records: list[dict]) -> str:
    parts = []
    for cap, group in regimes(records):
        header = _header(bool(cap))
        table = [header] + rows(group, bool(cap))
        widths = [
            max(len(row[i]) for row in table if len(row) > 4 and len(row) > i)
            for i in range(len(header))
        ]
        lines = [regime_title(cap) + ":"]
        for row in table:
            if len(row) == 4:  # a skipped, failed or killed run: its reason spans the row
                lines.append("  ".join(c.ljust(w) for c, w in zip(row[:3], widths)) + "  " + row[3])
            else:
                lines.append(
                    "  ".join(
                        c.rjust(w) if i >= 3 else c.ljust(w)
                        for i, (c, w) in enumerate(zip(row, widths))
                    )
                )
        parts.append("\n".join(lines))
    return "\n\n".join(parts)


def markdown_table(records: list[dict], capped: bool = False) -> str:
    header = _header(capped)
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in rows(records, capped):
        if len(row) == 4:
            row = row + [""] * (len(header) - 4)
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def profile_table(records: list[dict]) -> str:
    """Jask's time per pipeline stage (busy seconds, summed over its ops) against its wall time."""
    lines = [
        "| Workload | Input | Regime | Wall, that round (s) | Pipelines (s) | Read busy (s) "
        "| Compute busy (s) | Write busy (s) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in records:
        stages = r.get("jask_stage_seconds")
        if r["contender"] != "jask" or not stages or r["seconds"] is None:
            continue
        wall = r.get("measured_run_seconds") or r["seconds"]
        lines.append(
            f"| {r['workload']} | {r['size_bytes'] / GIB:g} GiB "
            f"| {regime_text(r.get('cap_bytes'))} "
            f"| {wall:.2f} | {stages['span']:.2f} | "
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


def _limit_text(r: dict) -> str:
    """ "84% (77%)": of the limit at the disk of the workload's own minutes, and at the run's best."""
    near, run = r["limit_fraction"], r.get("limit_fraction_run")
    text = _fmt(near, ".0%")
    return text if run is None or near is None else f"{text} ({run:.0%})"


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
        + _disk_lines(lim)
        + "\n"
        f"- In-memory float32 matmul: {lim['matmul_flops'] / 1e9:.1f} GFLOP/s, the best of NumPy's "
        f"({lim['numpy_matmul_flops'] / 1e9:.1f} GFLOP/s on {lim['matmul_side']}^3) and the in-memory W3 runs\n"
        f"- Versions: {versions}; Jask commit {m['commit']}\n"
        f"- Run on {m['date']}, {meta['seconds'] / 60:.1f} minutes in all"
    )


def _disk_lines(lim: dict) -> str:
    """What the disk probe measured: the best of before and after, each of them in brackets."""
    if "read_direct_bps" not in lim:  # results of the probe before its random reads and buffered
        return (
            f"- Disk, direct I/O, 16 MiB requests on a {lim['probe_bytes'] / MIB:g} MiB file, best of "
            f"before and after the workloads: read {_gb(lim['read_bps'])}, write {_gb(lim['write_bps'])}"
        )

    def both(key: str, show=_gb) -> str:
        return f"{show(lim[key])} ({show(lim[key + '_before'])}, {show(lim[key + '_after'])})"

    def iops(value: float) -> str:
        return f"{value / 1e3:.1f}k IOPS"

    lines = (
        f"- Disk, {lim.get('probe_text', '')}, on a {lim['probe_bytes'] / MIB:g} MiB file; best of "
        f"every probe of the run (before and after the workloads in brackets; the probes before "
        f"each workload's passes are in results.meta.json): read {both('read_bps')} = the better "
        f"of direct {both('read_direct_bps')} and buffered {both('read_buffered_bps')}; write "
        f"{both('write_bps')}; random 4 KiB reads {both('random_read_iops', iops)}, random 64 KiB "
        f"reads {both('random_read_bps')}"
    )
    fio = lim.get("fio")
    if fio:
        lines += "\n- fio reference (direct, " + (
            f"not run: {fio['error']})"
            if "error" in fio
            else f"{fio['engine']}, 4 MiB x 16 sequential, 32 random in flight, 3 s each): read "
            f"{_gb(fio['read_bps'])}, write {_gb(fio['write_bps'])}, random 4 KiB "
            f"{iops(fio['random_read_iops'])}, random 64 KiB {_gb(fio['random_read_bps'])}"
        )
    return lines


def _shapes(size: int, budget: int, names) -> str:
    plan = arrays(size, budget)
    lines = []
    for name in names:
        wl = WORKLOADS[name]
        inputs = ", ".join(f"{n} {plan[n].shape}" for n in wl.inputs)
        lines.append(f"- {name}, {wl.title}: {inputs}")
    return "\n".join(lines)


def _section(
    title: str,
    records: list[dict],
    meta: dict,
    plots: dict | None = None,
    with_targets: bool = False,
) -> str:
    sizes = sorted({r["size_bytes"] for r in records})
    names = sorted({r["workload"] for r in records})
    text = (
        f"## {title}\n\n`{meta['command']}`\n\n{_machine(meta)}\n"
        f"- Budget {meta['budget_bytes'] / MIB:g} MiB; input size "
        f"{', '.join(f'{s / GIB:g}' for s in sizes)} GiB (bytes of each large input)\n"
        + (f"- No capped pass: {meta['cap_unavailable']}\n" if meta.get("cap_unavailable") else "")
        + f"\nShapes at {sizes[-1] / GIB:g} GiB:\n\n{_shapes(sizes[-1], meta['budget_bytes'], names)}\n"
    )
    for cap, group in regimes(records):
        if len(regimes(records)) > 1 or cap:
            text += f"\n### {regime_title(cap)}\n"
        text += f"\n{markdown_table(group, bool(cap))}\n"
        if cap and (plots or {}).get("capped"):
            text += f"\n![time relative to Jask under the cap]({plots['capped']})\n"
    text += "\n`*` in memory: inputs loaded before timing, nothing written (the compute ceiling).\n"
    verdicts = targets.markdown(targets.judge(records)) if with_targets else ""
    if verdicts:
        text += f"\n### Issue 14's targets in this run\n\n{verdicts}"
    timeline = meta.get("timeline")
    if timeline:
        text += "\n### One Jask run's I/O timeline\n\n"
        if (plots or {}).get("timeline"):
            text += (
                f"{timeline['workload']} at {timeline['size_bytes'] / GIB:g} GiB, uncapped, one more "
                f"run besides the table's ({timeline['seconds']:.2f} s), recorded with "
                "`jask.stats(timeline=True)`: each pipeline stage's reads, computes and writes over "
                f"the timed part, and the bytes moved.\n\n![I/O timeline]({plots['timeline']})\n"
            )
        else:
            text += f"Not recorded: {timeline.get('error')}\n"
    return text + _decode_section(records) + _profile_section(records)


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


def write_markdown(path: str, main, scaling, plots: dict | None = None) -> None:
    """BENCHMARKS.md from the latest default run and the latest sweep, each (records, meta) or
    None; `plots` maps "scaling", "capped", "timeline" to the image files to embed."""
    here = os.path.dirname(os.path.abspath(path))
    relative = {k: os.path.relpath(v, here) for k, v in (plots or {}).items()}
    parts = [
        "# Benchmarks\n",
        "Written by `python -m bench` (see `bench/`); rerun it rather than editing this file.\n",
        "## Method\n",
        METHOD,
    ]
    if main:
        parts.append(_section("Results", *main, relative, with_targets=True))
    parts.append("## Scaling\n")
    parts.append(
        "Time against bytes moved (W1, W2) and flops (W3) at a fixed budget, and peak memory, from\n\n"
        "    python -m bench --scale 0.5,1,2,4,8\n\n"
        "(W1, W2 and W3 at each input size; expect half an hour or more on two cores, and about 30 GiB of free disk).\n"
    )
    if scaling:
        if "scaling" in relative:
            parts.append(f"![time and peak RSS against size]({relative['scaling']})\n")
        parts.append(_section("Scaling sweep", *scaling).replace("## Scaling sweep", "### Sweep"))
    else:
        parts.append(_previous_sweep(path) or "No sweep has been run yet.\n")
    with open(path, "w") as f:
        f.write("\n".join(parts))


def _previous_sweep(path: str) -> str | None:
    """The sweep of the report at `path` (its plot and its "### Sweep" section, to the end of its
    Scaling section), or None: a sweep's records may live outside bench/ (`--out`), and a default
    run must not drop the sweep it cannot find."""
    try:
        with open(path) as f:
            text = f.read()
    except FileNotFoundError:
        return None
    scaling = text.find("\n## Scaling\n")
    sweep = text.find("\n### Sweep\n", scaling)
    if scaling < 0 or sweep < 0:
        return None
    following = text.find("\n## ", sweep)
    body = text[sweep + 1 : following + 1 if following >= 0 else len(text)]
    plot = text.rfind("\n![", scaling, sweep)
    if plot >= 0:
        body = text[plot + 1 : sweep + 1] + body
    return body


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_capped(records: list[dict], path: str) -> None:
    """The capped table as bars: per workload each contender's time relative to Jask's (log scale),
    a killed, failed or unfinished contender as a hatched bar at the top labelled with why."""
    plt = _pyplot()
    capped = [r for r in records if r.get("cap_bytes")]
    names = list(dict.fromkeys(r["workload"] for r in capped))
    contenders = [c for c in CONTENDERS if any(r["contender"] == c for r in capped)]
    fig, ax = plt.subplots(figsize=(max(6, 1.6 * len(names) + 2), 4.8))
    width = 0.8 / max(1, len(contenders))
    done = [r["vs_jask"] for r in capped if r.get("vs_jask")]
    top = max([4.0, *done]) * 1.6
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for k, contender in enumerate(contenders):
        color = colors[k % len(colors)]
        for i, name in enumerate(names):
            r = next(
                (r for r in capped if r["workload"] == name and r["contender"] == contender), None
            )
            if r is None:
                continue
            x = i + (k - (len(contenders) - 1) / 2) * width
            if r.get("vs_jask"):
                ax.bar(x, r["vs_jask"], width, color=color)
                ax.text(x, r["vs_jask"] * 1.05, f"{r['vs_jask']:.2f}", ha="center", fontsize=6)
            else:  # not finished (say why), or finished where Jask did not (give its time)
                finished = r["seconds"] is not None
                ax.bar(
                    x,
                    top,
                    width,
                    bottom=1e-9,
                    color=color if finished else "none",
                    alpha=0.35 if finished else 1.0,
                    edgecolor=color,
                    hatch=None if finished else "//",
                )
                ax.text(
                    x,
                    top**0.5,
                    f"{r['seconds']:.2f} s; Jask did not finish" if finished else _why(r),
                    rotation=90,
                    ha="center",
                    va="center",
                    fontsize=6,
                    backgroundcolor="white",
                )
        ax.bar(0, 0, 0, color=color, label=CONTENDERS[contender])  # legend entry
    cap = capped[0]["cap_bytes"] if capped else 0
    ax.axhline(1, color="k", linewidth=0.8)
    ax.set(yscale="log", ylim=(0.1, top), ylabel="time / Jask's time (log)")
    ax.set_title(
        f"Under a {size_text(cap)} memory cap, page cache counted: time relative to Jask\n"
        "(hatched: did not finish, and why; killed by the cap: at its cgroup peak)",
        fontsize=9,
    )
    from matplotlib.ticker import FuncFormatter

    ax.yaxis.set_major_formatter(FuncFormatter(_tick))
    ax.yaxis.set_minor_formatter(FuncFormatter(_tick))
    ax.set_xticks(
        range(len(names)),
        [
            n + (" *" if any(small_data(r) for r in capped if r["workload"] == n) else "")
            for n in names
        ],
    )
    if any(small_data(r) for r in capped):
        ax.set_xlabel(f"* data under {CAP_RATIO}x the cap")
    ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _why(r: dict) -> str:
    text = r["error"] or r["note"] or "no time"
    if r.get("killed_by_cap"):
        peak = r.get("cgroup_peak_bytes")
        text = "killed" + (f" at {peak / MIB:.0f} MiB" if peak else "")
    return text if len(text) <= 40 else text[:37] + "..."


TIMELINE_STAGES = ("read", "compute", "write")


def load_timeline(path: str) -> list[dict]:
    """The events `python -m bench.run_one --timeline` wrote, checked for the fields the plot uses."""
    with open(path) as f:
        events = json.load(f)
    for e in events:
        missing = {"stage", "op", "start", "end", "bytes"} - set(e)
        if missing or e["stage"] not in TIMELINE_STAGES:
            raise ValueError(
                f"{path}: timeline event {e} lacks {sorted(missing)} or has an unknown stage"
            )
    return events


def plot_timeline(events: list[dict], path: str, about: dict | None = None) -> None:
    """One Jask run's I/O timeline: above, when each stage (read, compute, write) of each op's
    pipeline was busy; below, the bytes read and written so far."""
    plt = _pyplot()
    ops = list(dict.fromkeys(e["op"] for e in events))
    fig, (lanes, volume) = plt.subplots(
        2,
        1,
        figsize=(11, 2.2 + 0.55 * len(ops) * len(TIMELINE_STAGES) ** 0.5),
        sharex=True,
        gridspec_kw={"height_ratios": [max(2, len(ops)), 1.5]},
    )
    colors = {"read": "tab:blue", "compute": "tab:orange", "write": "tab:green"}
    labels = []
    for i, op in enumerate(ops):
        for j, stage in enumerate(TIMELINE_STAGES):
            spans = [
                (e["start"], e["end"] - e["start"])
                for e in events
                if e["op"] == op and e["stage"] == stage
            ]
            y = len(TIMELINE_STAGES) * i + j
            lanes.broken_barh(spans, (y - 0.4, 0.8), color=colors[stage])
            labels.append(
                f"{op if len(op) <= 28 else op[:27] + '…'}: {stage}"
            )  # fused ops' names are long
    lanes.set_yticks(range(len(labels)), labels, fontsize=7)
    lanes.invert_yaxis()
    title = "Jask I/O timeline"
    if about:
        title += (
            f": {about['workload']} at {about['size_bytes'] / GIB:g} GiB, {about['seconds']:.2f} s"
        )
    lanes.set_title(title)
    for stage in ("read", "write"):
        ends = sorted((e["end"], e["bytes"]) for e in events if e["stage"] == stage)
        if ends:
            times, sizes = zip(*ends)
            total = 0
            cumulative = [(total := total + b) / MIB for b in sizes]
            volume.step(
                [0, *times],
                [0, *cumulative],
                where="post",
                color=colors[stage],
                label=f"{stage} (MiB)",
            )
    volume.set(xlabel="seconds from the start of the timed part", ylabel="MiB so far")
    volume.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _tick(value: float, _) -> str:
    """Log-axis labels at 1, 2 and 5 times powers of ten only, written plainly."""
    if value <= 0:
        return ""
    lead = round(value / 10 ** math.floor(math.log10(value)), 6)
    return f"{value:g}" if lead in (1, 2, 5) else ""


def plot(records: list[dict], path: str) -> None:
    """Time against GB moved (W1, W2) and GFLOP (W3), with the limit dashed; peak RSS against input size."""
    from matplotlib.ticker import FuncFormatter

    plt = _pyplot()

    plain = FuncFormatter(_tick)

    done = [r for r in records if r["seconds"] is not None]
    panels = [(w, "GB read + written", "data_bytes") for w in ("W1", "W2")] + [
        ("W3", "GFLOP", "flops")
    ]
    panels = [p for p in panels if any(r["workload"] == p[0] for r in done)]
    # one panel per workload the records have, and the memory panel last
    fig, axes = plt.subplots(
        1, len(panels) + 1, figsize=(5.5 * (len(panels) + 1), 4.5), squeeze=False
    )
    axes = axes[0]
    for ax, (name, label, key) in zip(axes, panels):
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
    ax = axes[-1]
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
