"""The fuzz harness catches each way a trial can break the promise (so its passes mean something)."""

import io

import numpy as np
import pytest
from fuzz_harness import FIFO, Symlink, Trial, check_trials


def npy(array):
    buf = io.BytesIO()
    np.save(buf, array)
    return buf.getvalue()


OPEN = "out = jask.DiskArray.open(P + '/a.npy')"
LOAD = "out = np.load(P + '/a.npy')"
GOOD = npy(np.arange(10, dtype=np.float32))


def test_clean_refusals_and_equal_values_pass(tmp_path):
    trials = [
        Trial("good", {"a.npy": GOOD}, OPEN, LOAD),
        Trial("fifo", {"a.npy": FIFO}, OPEN),
        Trial("truncated", {"a.npy": GOOD[:-5]}, OPEN, LOAD),
        Trial("device", {"a.npy": Symlink("/dev/zero")}, OPEN),
    ]
    counts = check_trials(trials, tmp_path)
    assert counts["values"] == 1 and sum(counts.values()) == 4


def test_each_child_has_a_scratch_folder_of_its_own(tmp_path):
    write = "out = jask.DiskArray.from_numpy(np.arange(3.0, dtype=np.float32)) + 1"
    counts = check_trials([Trial(f"scratch {i}", {"a": b""}, write) for i in range(3)], tmp_path)
    assert counts["values"] == 3


@pytest.mark.parametrize(
    "trial, problem",
    [
        (Trial("wrong values", {"a.npy": GOOD}, OPEN, "out = np.load(P + '/a.npy') + 1"), "differ"),
        (Trial("wrong dtype", {"a.npy": GOOD}, OPEN, LOAD + ".astype(np.int32)"), "int32"),
        (Trial("accepted", {"a.npy": GOOD}, OPEN, "raise ValueError('no')"), "refuses"),
        (Trial("key error", {"a.npy": GOOD}, "{}['k']"), "raised KeyError"),
        (Trial("nameless", {"a.npy": GOOD}, "raise ValueError('bad file')"), "names no file"),
        (Trial("crash", {"a.npy": GOOD}, "import os, signal; os.kill(os.getpid(), 9)"), "crashed"),
        (
            Trial("writes", {"a.npy": GOOD}, "open(P + '/a.npy', 'ab').write(b'x'); out = 1"),
            "changed a.npy",
        ),
        (
            Trial("outside", {"a.npy": GOOD}, "open(P + '/../../outside/x', 'w'); out = 1"),
            "outside",
        ),
        (Trial("memory", {"a.npy": GOOD}, "out = np.ones(1 << 40)"), "MemoryError"),
    ],
    ids=lambda v: v.name if isinstance(v, Trial) else "",
)
def test_each_broken_promise_fails_naming_the_trial(tmp_path, trial, problem):
    with pytest.raises(AssertionError, match=problem) as e:
        check_trials([trial], tmp_path)
    assert trial.name in str(e.value)


def test_a_trial_that_hangs_fails_after_a_second_try_and_a_slow_one_passes(tmp_path, monkeypatch):
    import fuzz_harness

    monkeypatch.setattr(fuzz_harness, "TRIAL_TIMEOUT_S", 1)
    slow = Trial("slow", {"a": b""}, "import time; time.sleep(1.5); out = 1")  # 1 s, then 4 s alone
    hangs = Trial("hangs", {"a": b""}, "import time; time.sleep(60)")
    with pytest.raises(AssertionError, match="1 of 2 trials failed:\nhangs .*hung") as e:
        check_trials([slow, hangs], tmp_path)
    assert "slow" not in str(e.value)  # timed out at 1 s, then passed alone with 4 s


def test_a_crash_amid_a_childs_trials_fails_that_trial_alone(tmp_path):
    good = [Trial(f"good {i}", {"a.npy": GOOD}, OPEN, LOAD) for i in range(3)]
    crash = Trial("crash", {"a.npy": GOOD}, "import os, signal; os.kill(os.getpid(), 9)")
    with pytest.raises(AssertionError, match="1 of 4 trials failed:\ncrash .*crashed: SIGKILL"):
        check_trials([good[0], crash, good[1], good[2]], tmp_path)


def test_a_trial_that_spoils_its_child_for_the_next_is_not_their_failure(tmp_path):
    # The poison breaks np.load for the trials after it in its child (the good trial's reference
    # then refuses the file); the good trial, run again alone, passes.
    poison = Trial("poison", {"a": b""}, "np.load = None; out = 1")
    counts = check_trials([poison, Trial("good", {"a.npy": GOOD}, OPEN, LOAD)], tmp_path)
    assert counts == {"values": 2}
