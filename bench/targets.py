"""Issue 14's targets, judged from one run's scored records.

Each target is checked per workload and regime (uncapped, each cap):
- under a cap, Jask finishes every workload (a Jask run without a time is a missed target in
  either regime: nothing else of it can be judged);
- a workload bound by the disk (its limit is bytes over the disk's rates, not flops) runs at 90%
  of its limit or more (W6 and W7 have targets of their own below);
- Jask is ahead of every out-of-core peer that finishes, by 1.5x or more where the peer is not
  itself at its limit. A peer counts as at its limit where 1.5x its speed would be over the
  limit (it runs at 1 / 1.5 = 67% of its limit or more): no contender can be 1.5x ahead of it
  there, so Jask needs only to be ahead;
- W7 within 1.2x of its bound: the larger of its weights over the disk's rate and its flops over
  the matmul rate of its own matmuls (128 x 4096 by 4096 x 4096 in XLA, not the square matmul of
  the run's probe), which is the time of the same jitted forward pass in memory where that ran
  (in the uncapped pass: the compute does not change under the cap);
- W6 at 2x the NumPy loader's samples/s or more, or at its limit.

In-memory contenders load their inputs before timing: they are the compute ceiling, not peers.
"""

from __future__ import annotations

from dataclasses import dataclass

from .harness import regime_text
from .workloads import IN_MEMORY

AT_LIMIT = 0.9  # a fraction of the limit that counts as at the limit
PEER_MARGIN = 1.5
W7_BOUND_FACTOR = 1.2
W6_LOADER_FACTOR = 2.0
OWN_TARGETS = {"W6", "W7"}  # workloads whose disk target is their own


@dataclass(frozen=True)
class Verdict:
    target: str
    workload: str
    regime: str
    measured: str
    met: bool


def judge(records: list[dict]) -> list[Verdict]:
    """The verdicts of every target over `records` (scored: `harness.score`, `report.compare`)."""
    verdicts = []
    groups = _groups(records)
    for (workload, size, cap), group in groups.items():
        jask = group.get("jask")
        if jask is None:
            continue
        regime = regime_text(cap)
        if jask["seconds"] is None:  # uncapped too: no other target can be judged then
            finishes = "finishes under the cap" if cap else "finishes"
            verdicts.append(Verdict(finishes, workload, regime, _failure(jask), False))
            continue
        if cap:
            verdicts.append(
                Verdict(
                    "finishes under the cap", workload, regime, f"{jask['seconds']:.2f} s", True
                )
            )
        verdicts += _disk_target(workload, regime, jask)
        verdicts += [_peer_target(workload, regime, jask, peer) for peer in _peers(group)]
        if workload == "W7":
            in_memory = groups.get((workload, size, None), {}).get("jax")
            verdicts.append(_w7_target(regime, jask, in_memory))
        if workload == "W6":
            verdicts.append(_w6_target(regime, jask, group.get("numpy")))
    return verdicts


def _groups(records: list[dict]) -> dict[tuple, dict[str, dict]]:
    groups: dict[tuple, dict[str, dict]] = {}
    for r in records:
        key = (r["workload"], r["size_bytes"], r.get("cap_bytes"))
        groups.setdefault(key, {})[r["contender"]] = r
    return groups


def _failure(r: dict) -> str:
    if r.get("killed_by_cap"):
        return "killed by the cap"
    return r.get("error") or r.get("note") or "no time"


def _peers(group: dict[str, dict]) -> list[dict]:
    return [
        r
        for name, r in group.items()
        if name != "jask" and name not in IN_MEMORY and r["seconds"] is not None
    ]


def _fraction(r: dict) -> str:
    f = r.get("limit_fraction")
    return "-" if f is None else f"{f:.0%}"


def _disk_target(workload: str, regime: str, jask: dict) -> list[Verdict]:
    if workload in OWN_TARGETS or jask.get("limit_bound") != "disk":
        return []
    fraction = jask.get("limit_fraction") or 0.0
    return [
        Verdict(
            f"at {AT_LIMIT:.0%} of the disk's limit or more",
            workload,
            regime,
            f"{fraction:.0%}",
            fraction >= AT_LIMIT,
        )
    ]


def _peer_target(workload: str, regime: str, jask: dict, peer: dict) -> Verdict:
    ratio = peer["seconds"] / jask["seconds"]
    peer_at_limit = (peer.get("limit_fraction") or 0.0) >= 1 / PEER_MARGIN
    needed = 1.0 if peer_at_limit else PEER_MARGIN
    measured = (
        f"{peer['contender_name']} {ratio:.2f}x Jask's time, at {_fraction(peer)} of its limit"
    )
    target = f"ahead of each peer, by {PEER_MARGIN}x where it is under {1 / PEER_MARGIN:.0%} of its limit"
    return Verdict(target, workload, regime, measured, ratio >= needed)


def _w7_target(regime: str, jask: dict, in_memory: dict | None) -> Verdict:
    bound = jask.get("limit_seconds") or 0.0
    measured = ""
    if in_memory and in_memory["seconds"] and in_memory["seconds"] > bound:
        bound = in_memory["seconds"]
        measured = f" of the forward pass in memory ({bound:.2f} s)"
    elif bound:
        measured = f" of the disk's and the probe's matmul rate's bound ({bound:.2f} s)"
    times = jask["seconds"] / bound if bound else float("inf")
    return Verdict(
        f"within {W7_BOUND_FACTOR}x of its bound",
        "W7",
        regime,
        f"{times:.2f}x{measured}",
        times <= W7_BOUND_FACTOR,
    )


def _w6_target(regime: str, jask: dict, numpy: dict | None) -> Verdict:
    fraction = jask.get("limit_fraction") or 0.0
    target = f"{W6_LOADER_FACTOR:g}x the NumPy loader's samples/s, or at its limit"
    if numpy is None or (numpy["error"] or "").startswith("not run"):
        return Verdict(target, "W6", regime, f"{fraction:.0%} of its limit", fraction >= AT_LIMIT)
    if numpy["seconds"] is None:  # killed by the cap or timed out: slower than any Jask time
        return Verdict(target, "W6", regime, f"NumPy loader {_failure(numpy)}", True)
    speedup = jask["throughput"] / numpy["throughput"]
    met = speedup >= W6_LOADER_FACTOR or fraction >= AT_LIMIT
    return Verdict(
        target, "W6", regime, f"{speedup:.2f}x NumPy's samples/s, {fraction:.0%} of its limit", met
    )


def markdown(verdicts: list[Verdict]) -> str:
    """The verdicts as a table, with a count of those met."""
    if not verdicts:
        return ""
    met = sum(v.met for v in verdicts)
    lines = [
        f"{met} of {len(verdicts)} met.\n",
        "| Target | Workload | Regime | Measured | Met |",
        "|---|---|---|---|---|",
    ]
    lines += [
        f"| {v.target} | {v.workload} | {v.regime} | {v.measured} | {'yes' if v.met else '**no**'} |"
        for v in verdicts
    ]
    return "\n".join(lines) + "\n"
