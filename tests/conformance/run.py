"""Runs JAX's test files (tests/conformance/jax_tests/, JAX's tests at the installed jax's tag,
unchanged) with DiskArrays given to the function under test (plugin.py), and reports per file:
the tests, those that pass on jax.Arrays (baseline), those of these that received a DiskArray,
and those of these that pass with DiskArrays, at each memory budget.

    python tests/conformance/run.py                       # what `make conformance` runs
    python tests/conformance/run.py --files fft linalg    # some files
    python tests/conformance/run.py --ids ID [ID ...]     # some tests (pytest node ids)
    python tests/conformance/run.py --per-file 25         # 25 tests of each file (make's default)

The first budget runs every test twice (baseline, then with DiskArrays); the other budgets run,
with DiskArrays only, the tests that passed the baseline and received a DiskArray. JAX's
generated-case sampling (JAX_NUM_GENERATED_CASES, sampled with JAX's fixed seed) sets how many
cases each parameterized test has. Writes <out>/conformance.md (the tables and the failures
grouped by error) and <out>/conformance.json (every test's record).
"""

import argparse
import fnmatch
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
JAX_TESTS = HERE / "jax_tests"
FILES = [
    "lax_numpy", "lax_numpy_reducers", "lax_numpy_operators", "lax_numpy_indexing", "lax",
    "lax_autodiff", "lax_vmap", "lax_vmap_op", "lax_control_flow", "linalg", "fft", "nn", "random",
]  # fmt: skip
DEFAULT_CASES = 1
DEFAULT_BUDGETS = ("64MB", "64KB")


def load_exceptions(path=HERE / "exceptions.txt"):
    """[(kind, pattern, reason)]: kind 'limitation' (accepted, reasoned) or 'bug' (a known wrong
    result or error, never accepted: listed until fixed). Lines: `kind pattern reason...`."""
    out = []
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        kind, pattern, reason = line.split(None, 2)
        if kind not in ("limitation", "bug"):
            raise ValueError(f"{path}: unknown kind {kind!r} in {raw!r}")
        out.append((kind, pattern, reason))
    return out


def listed(test_id, exceptions):
    """The (kind, pattern, reason) that lists test_id (its id relative to jax_tests/), or None."""
    short = short_id(test_id)
    for entry in exceptions:
        if fnmatch.fnmatchcase(short, entry[1]):
            return entry
    return None


def short_id(test_id):
    return test_id.split("jax_tests/", 1)[-1]


def run_pytest(targets, budget, out, *, baseline, cases, workers, timeout):
    out.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    env.update(
        JAX_NUM_GENERATED_CASES=str(cases),
        JASK_CONFORMANCE_OUT=str(out),
        JASK_CONFORMANCE_BUDGET=budget,
        JASK_CONFORMANCE_BASELINE="1" if baseline else "0",
        JASK_CONFORMANCE_TIMEOUT=str(timeout),
        PYTHONPATH=os.pathsep.join(filter(None, [str(HERE), env.get("PYTHONPATH")])),
    )
    cmd = [sys.executable, "-m", "pytest", "-c", str(HERE / "pytest.ini"), "--rootdir", str(HERE)]
    cmd += ["-p", "plugin", "-q", "--no-header", "-p", "no:randomly", "--tb=no", "-rN"]
    if workers > 1:
        cmd += ["-n", str(workers), "--dist", "load"]
    if len(" ".join(targets)) > 100_000:
        args_file = out / "targets.txt"
        args_file.write_text("\n".join(targets))
        cmd += [f"@{args_file}"]
    else:
        cmd += targets
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    (out / "pytest.log").write_text(proc.stdout + proc.stderr)
    return proc.stdout.strip().splitlines()[-1:] if proc.stdout.strip() else []


def collect(targets, cases):
    """The node ids (relative to jax_tests/) pytest collects from targets."""
    env = dict(os.environ, JAX_NUM_GENERATED_CASES=str(cases))
    cmd = [sys.executable, "-m", "pytest", "-c", str(HERE / "pytest.ini"), "--rootdir", str(HERE)]
    cmd += ["--collect-only", "-q", *targets]
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    return [short_id(line) for line in proc.stdout.splitlines() if "::" in line]


def spread(ids, per_file):
    """Up to per_file ids of each file, evenly spread over its collected order (deterministic)."""
    by_file = defaultdict(list)
    for i in ids:
        by_file[i.split("::")[0]].append(i)
    out = []
    for name in sorted(by_file):
        its = by_file[name]
        step = max(1, len(its) / per_file)
        out += [its[int(k * step)] for k in range(min(per_file, len(its)))]
    return out


def read_records(out):
    records = defaultdict(dict)
    for f in sorted(out.glob("*.jsonl")):
        for line in f.read_text().splitlines():
            rec = json.loads(line)
            records[rec.pop("id")].update(rec)
    for rec in records.values():
        if "baseline" in rec and "disk" not in rec:
            rec.update(disk="failed", error="crashed: the worker died during the DiskArray run")
    return records


def normalize(error):
    """An error message with its numbers, shapes and quoted values blanked, to group failures."""
    msg = (error or "").split("\n")[0]
    msg = re.sub(r"0x[0-9a-f]+", "#", msg)
    msg = re.sub(r"\[[^\]]*\]|\([^)]*\)", "(..)", msg)
    msg = re.sub(r"'[^']*'", "'..'", msg)
    msg = re.sub(r"\d+(\.\d+)?(e[-+]?\d+)?", "#", msg)
    return msg[:160]


def report(results, budgets, exceptions, cases, seconds):
    lines = [
        f"JAX's tests at jax-v0.10.2 with DiskArrays (JAX_NUM_GENERATED_CASES={cases}, "
        f"budgets {', '.join(budgets)}; {seconds / 60:.1f} min)",
        "",
    ]
    head = "| file | tests | baseline passes | received a DiskArray |"
    head += "".join(f" pass @{b} |" for b in budgets) + " listed |"
    lines += [head, "|" + "---|" * (5 + len(budgets))]
    by_file = defaultdict(list)
    for test_id, rec in results.items():
        by_file[short_id(test_id).split("::")[0]].append((test_id, rec))
    totals = Counter()
    for name in sorted(by_file):
        recs = by_file[name]
        row = Counter(tests=len(recs))
        for test_id, rec in recs:
            if rec.get("baseline") != "passed":
                continue
            row["baseline"] += 1
            if not rec.get("received"):
                continue
            row["received"] += 1
            for b in budgets:
                row[b] += rec.get(f"disk@{b}") == "passed"
            if listed(test_id, exceptions):
                row["listed"] += 1
        totals.update(row)
        cells = [row["tests"], row["baseline"], row["received"], *(row[b] for b in budgets)]
        lines.append(f"| {name} | " + " | ".join(map(str, cells)) + f" | {row['listed']} |")
    cells = [totals["tests"], totals["baseline"], totals["received"], *(totals[b] for b in budgets)]
    lines.append("| **all** | " + " | ".join(map(str, cells)) + f" | {totals['listed']} |")

    for b in budgets:
        groups = defaultdict(list)
        for test_id, rec in results.items():
            if rec.get("baseline") == "passed" and rec.get("received"):
                if rec.get(f"disk@{b}") != "passed":
                    key = (normalize(rec.get(f"error@{b}")), rec.get(f"where@{b}") or "")
                    groups[key].append(test_id)
        lines += [
            "",
            f"## Failures at {b}, grouped by error ({sum(map(len, groups.values()))})",
            "",
        ]
        for (msg, where), ids in sorted(groups.items(), key=lambda kv: -len(kv[1])):
            example = results[ids[0]].get(f"error@{b}", "")[:300].replace("\n", " ")
            unlisted = sum(listed(i, exceptions) is None for i in ids)
            lines.append(
                f"- **{len(ids)}** ({unlisted} unlisted) `{msg}`"
                + (f" at {where}" if where else "")
            )
            lines.append(f"  - e.g. `{short_id(ids[0])}`: {example}")
    return "\n".join(lines) + "\n"


def draft_exceptions(results, budgets, exceptions):
    """Lines for exceptions.txt for every failure not listed yet: a NotImplementedError (Jask
    refusing an operation on purpose) is a limitation, anything else a bug."""
    lines = []
    for test_id, rec in sorted(results.items()):
        if (
            rec.get("baseline") != "passed"
            or not rec.get("received")
            or listed(test_id, exceptions)
        ):
            continue
        for b in budgets:
            if rec.get(f"disk@{b}", "passed") != "passed":
                error = (rec.get(f"error@{b}") or "no error recorded").split("\n")[0].strip()
                kind = "limitation" if error.startswith("NotImplementedError") else "bug"
                at = "" if b == budgets[0] else f" (at {b} only)"
                lines.append(f"{kind} {test_id} {error[:200]}{at}")
                break
    return lines


def write_sample(results, budget, path, max_seconds, max_tests=300):
    """sample.txt: tests that passed the baseline and received a DiskArray, the quickest of each
    file first, taken from each file in turn until max_seconds (their disk runs' time) is used."""
    by_file = defaultdict(list)
    for test_id, rec in results.items():
        if rec.get("baseline") == "passed" and rec.get("received") and f"disk@{budget}" in rec:
            by_file[test_id.split("::")[0]].append((rec.get(f"seconds@{budget}", 60.0), test_id))
    queues = [sorted(v) for _, v in sorted(by_file.items())]
    chosen, used = [], 0.0
    while any(queues) and len(chosen) < max_tests:
        for q in queues:
            if q and used + q[0][0] <= max_seconds:
                seconds, test_id = q.pop(0)
                chosen.append(test_id)
                used += seconds
            elif q:
                q.clear()
    path.write_text("\n".join(sorted(chosen)) + "\n")
    return len(chosen), used


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--files", nargs="*", default=FILES, help="JAX test files (without _test.py)")
    p.add_argument("--ids", nargs="*", help="pytest node ids (relative to jax_tests/ or not)")
    p.add_argument("--ids-file", help="a file of node ids, one a line")
    p.add_argument("--budgets", default=",".join(DEFAULT_BUDGETS))
    p.add_argument(
        "--cases", type=int, default=int(os.environ.get("JAX_NUM_GENERATED_CASES", DEFAULT_CASES))
    )
    p.add_argument(
        "--per-file", type=int, help="run only this many tests of each file, spread evenly"
    )
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--timeout", type=int, default=120, help="seconds per test and phase")
    p.add_argument("--out", default=str(ROOT / "build" / "conformance"))
    p.add_argument(
        "--draft-exceptions",
        action="store_true",
        help="print exceptions.txt lines for the unlisted failures of the last run in --out, and stop",
    )
    p.add_argument(
        "--write-sample",
        type=float,
        metavar="SECONDS",
        help="write sample.txt from the last run in --out (DiskArray runs of SECONDS in all)",
    )
    args = p.parse_args(argv)
    budgets = args.budgets.split(",")
    out = Path(args.out)
    if args.draft_exceptions or args.write_sample:
        results = json.loads((out / "conformance.json").read_text())
        if args.draft_exceptions:
            print("\n".join(draft_exceptions(results, budgets, load_exceptions())))
        else:
            n, used = write_sample(results, budgets[-1], HERE / "sample.txt", args.write_sample)
            print(
                f"conformance: {n} tests in {HERE / 'sample.txt'} ({used:.0f} s of DiskArray runs)"
            )
        return
    shutil.rmtree(out, ignore_errors=True)
    ids = list(args.ids or [])
    if args.ids_file:
        ids += [i for i in Path(args.ids_file).read_text().split() if i]
    if ids:
        targets = [f"tests/conformance/jax_tests/{short_id(i)}" for i in ids]
    else:
        targets = [f"tests/conformance/jax_tests/{f}_test.py" for f in args.files]
    if args.per_file:
        ids = spread(collect(targets, args.cases), args.per_file)
        targets = [f"tests/conformance/jax_tests/{i}" for i in ids]
    exceptions = load_exceptions()

    start = time.monotonic()
    results = {}
    for n, budget in enumerate(budgets):
        if n and not targets:
            break
        print(
            f"conformance: {len(targets) if ids or n else len(args.files)} targets at {budget}...",
            flush=True,
        )
        summary = run_pytest(
            targets, budget, out / f"run{n}", baseline=n == 0, cases=args.cases,
            workers=args.workers, timeout=args.timeout,
        )  # fmt: skip
        print("  " + " ".join(summary), flush=True)
        for test_id, rec in read_records(out / f"run{n}").items():
            r = results.setdefault(short_id(test_id), {})
            if n == 0:
                r.update(baseline=rec.get("baseline"), received=rec.get("received", False))
            for k in ("disk", "error", "where", "seconds"):
                if k in rec:
                    r[f"{k}@{budget}"] = rec[k]
        # The next budgets: the tests that passed the baseline and received a DiskArray.
        targets = sorted(
            f"tests/conformance/jax_tests/{i}"
            for i, r in results.items()
            if r.get("baseline") == "passed" and r.get("received")
        )
    seconds = time.monotonic() - start

    text = report(results, budgets, exceptions, args.cases, seconds)
    (out / "conformance.md").write_text(text)
    (out / "conformance.json").write_text(json.dumps(results, indent=1, sort_keys=True))
    print(text.split("\n## ")[0])
    print(
        f"conformance: the report is {out / 'conformance.md'}, every test's record {out / 'conformance.json'}"
    )


if __name__ == "__main__":
    main()
