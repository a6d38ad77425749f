"""Scratch space can be trusted: it never deletes what is not Jask's, it goes on SIGTERM and
SIGHUP as on exit, and a full disk leaves nothing of a failed op behind."""

import os
import signal
import stat
import subprocess
import sys
import textwrap

import pytest
from test_scratch import run_python

import jask
from jask import _engine

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENV = dict(os.environ, PYTHONPATH=REPO)


def make_user_folder(path, with_lock):
    """A folder of the user's, named as Jask names its own."""
    path.mkdir()
    (path / "results.csv").write_text("step,loss\n1,0.5\n")
    if with_lock:
        (path / ".lock").write_text("")
    return path


def dead_pid():
    child = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        text=True,
        capture_output=True,
        check=True,
    )
    return int(child.stdout)


def abandoned_jask_folder(root):
    """The scratch folder of a Jask process SIGKILLed while holding an array."""
    crashed = run_python(
        """
        import os, signal, sys, numpy as np, jask
        jask.set_memory_budget("64MB", scratch_dir=sys.argv[1])
        x = jask.DiskArray.from_numpy(np.ones((100, 100), np.float32)) * 3.0
        print(jask.scratch_dir(), flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
        """,
        root,
        root,
        check=False,
    )
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr
    folder = crashed.stdout.strip()
    assert os.listdir(folder), "the crashed process left no files to reclaim"
    return folder


START_JASK = """
    import sys, numpy as np, jask
    jask.set_memory_budget("64MB", scratch_dir=sys.argv[1])
    jask.DiskArray.from_numpy(np.ones(3, np.float32))
    print(jask._engine.scratch_reclaimed_folders())
"""


def test_only_jasks_own_abandoned_folders_are_reclaimed(tmp_path):
    root = tmp_path / "data"
    root.mkdir()
    elsewhere = make_user_folder(tmp_path / "precious", with_lock=True)
    user = [
        make_user_folder(root / "proc-results", with_lock=True),
        make_user_folder(root / "proc-plots", with_lock=False),
        make_user_folder(root / f".staging-{dead_pid()}-x", with_lock=False),
    ]
    (root / "proc-linked").symlink_to(elsewhere, target_is_directory=True)
    abandoned = abandoned_jask_folder(root)

    started = run_python(START_JASK, tmp_path, root)

    assert started.stdout.split() == ["1"]  # the crashed process's folder, nothing else
    assert not os.path.exists(abandoned)
    for folder in [*user, elsewhere]:
        assert (folder / "results.csv").read_text() == "step,loss\n1,0.5\n", folder
    assert os.readlink(root / "proc-linked") == str(elsewhere)
    assert sorted(os.listdir(root)) == sorted(
        ["proc-results", "proc-plots", user[2].name, "proc-linked"]
    )


def test_the_current_folder_as_scratch_keeps_the_users_folders(tmp_path):
    make_user_folder(tmp_path / "proc-results", with_lock=False)
    started = run_python(START_JASK, tmp_path, ".")
    assert started.stdout.split() == ["0"]
    assert (tmp_path / "proc-results" / "results.csv").exists()
    assert os.listdir(tmp_path) == ["proc-results"]  # Jask's own folder went at exit


def test_an_empty_scratch_dir_is_a_value_error():
    budget = jask.memory_budget()
    folder = jask.scratch_dir()
    with pytest.raises(ValueError, match='scratch_dir must name a folder; got ""'):
        jask.set_memory_budget("1MB", scratch_dir="")
    with pytest.raises(ValueError, match='scratch folder is ""'):
        _engine.configure_scratch("", False)
    assert jask.memory_budget() == budget  # a refused call changes nothing
    assert jask.scratch_dir() == folder


def test_a_new_scratch_root_is_private_under_umask_000(tmp_path):
    out = run_python(
        """
        import os, sys, numpy as np
        os.umask(0)
        import jask
        jask.set_memory_budget("64MB", scratch_dir=sys.argv[1])
        x = jask.DiskArray.from_numpy(np.ones(3, np.float32))
        print(jask.scratch_dir())
        """,
        tmp_path,
        tmp_path / "new" / "root",
    )
    folder = out.stdout.strip()
    modes = {
        p: stat.S_IMODE(os.stat(p).st_mode) for p in (tmp_path / "new", tmp_path / "new" / "root")
    }
    assert modes == {tmp_path / "new": 0o700, tmp_path / "new" / "root": 0o700}
    assert os.path.dirname(folder) == str(tmp_path / "new" / "root")


# -- signals ----------------------------------------------------------------------------

SIGNALLED_CHILD = """
    import signal, sys, numpy as np
    # The defaults, as a terminal's shell starts a program with (under nohup, SIGHUP comes ignored,
    # and Jask leaves an ignored signal alone).
    signal.signal(signal.SIGHUP, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    {before}
    import jask
    jask.set_memory_budget("64MB", scratch_dir=sys.argv[1])
    x = jask.DiskArray.from_numpy(np.ones((64, 64), np.float32))
    y = x * 2.0
    print(jask.scratch_dir(), flush=True)
    print("ready", flush=True)
    sys.stdin.read()
"""


def signalled(tmp_path, signum, before=""):
    """Starts a child holding scratch arrays, signals it once it is ready, waits for it."""
    child = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(SIGNALLED_CHILD.format(before=before)), tmp_path],
        env=ENV,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        folder = child.stdout.readline().strip()
        assert child.stdout.readline() == "ready\n", child.stderr.read()
        assert len(os.listdir(folder)) >= 2  # the arrays' files
        child.send_signal(signum)
        out, err = child.communicate(timeout=60)
    finally:
        child.kill()
    return child.returncode, folder, out, err


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_a_terminating_signal_removes_the_scratch_folder_and_still_kills(tmp_path, signum):
    returncode, folder, _, err = signalled(tmp_path, signum)
    assert returncode == -signum, err
    assert not os.path.exists(folder)
    assert os.listdir(tmp_path) == []


def test_a_users_own_signal_handler_is_kept(tmp_path):
    before = """
    import signal
    def handler(signum, frame):
        print("user handler", flush=True)
        sys.exit(3)
    signal.signal(signal.SIGTERM, handler)
    """
    returncode, folder, out, err = signalled(
        tmp_path, signal.SIGTERM, textwrap.indent(textwrap.dedent(before), "    ")
    )
    assert returncode == 3, err
    assert out == "user handler\n"
    assert not os.path.exists(folder)  # sys.exit ran atexit


def test_a_forked_child_killed_by_sigterm_leaves_its_parents_folder(tmp_path):
    out = run_python(
        """
        import os, signal, sys, numpy as np, jask
        jask.set_memory_budget("64MB", scratch_dir=sys.argv[1])
        x = jask.DiskArray.from_numpy(np.ones(8, np.float32))
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.write(w, b"r")
            while True:
                signal.pause()
        os.read(r, 1)
        os.kill(pid, signal.SIGTERM)
        _, status = os.waitpid(pid, 0)
        print(os.WTERMSIG(status), float(np.asarray(x).sum()), os.path.exists(x.path))
        """,
        tmp_path,
        tmp_path,
    )
    assert out.stdout.split() == [str(int(signal.SIGTERM)), "8.0", "True"]


# -- a full disk ------------------------------------------------------------------------


@pytest.fixture
def small_filesystem(tmp_path):
    """An 8 MiB tmpfs of its own (mounting needs root; skipped where it is not permitted)."""
    mount_point = tmp_path / "small"
    mount_point.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=8m,mode=0700", "tmpfs", str(mount_point)],
        capture_output=True,
        text=True,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {mounted.stderr.strip()}")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", str(mount_point)], check=True)


FULL_DISK = """
    import os, sys, jax, numpy as np, jask
    from jask import _engine

    mount_point = sys.argv[1]
    jask.set_memory_budget("1MB", scratch_dir=mount_point, allow_tmpfs=True)
    rng = np.random.default_rng(0)
    x_host = rng.standard_normal((64, 256)).astype(np.float32)
    w = rng.standard_normal((256, 2048)).astype(np.float32)  # 2 MiB, copied to scratch by x @ w
    x = jask.DiskArray.from_numpy(x_host)
    folder = jask.scratch_dir()
    # jitted, w is copied inside the program: a failed program never reaches the call that
    # would free the copy, so the engine frees the floating arrays of a failed run
    step = jax.jit(lambda a, b: jask.sum(a @ b) * 0 + (a @ b) * 1.0)

    def free_bytes():
        st = os.statvfs(mount_point)
        return st.f_bavail * st.f_frsize

    def state():
        return free_bytes(), _engine.live_arrays(), sorted(os.listdir(folder))

    # Fill the file system to the last byte: even the copy's header cannot be written.
    filler = os.path.join(mount_point, "filler")
    with open(filler, "wb", buffering=0) as f:
        chunk = 1 << 16
        while chunk:
            try:
                f.write(bytes(chunk))
            except OSError:
                chunk //= 2
    before = state()
    for attempt in range(4):  # every failure frees what it made: nothing accumulates
        try:
            PRODUCT
            raise SystemExit("PRODUCT succeeded on a full disk")
        except (OSError, jax.errors.JaxRuntimeError) as e:  # jitted: XLA's error, INTERNAL
            message = str(e).replace(folder, "<folder>")
        assert state() == before, (attempt, state(), before)
    print(message)

    os.remove(filler)
    for _ in range(2):
        y = np.asarray(PRODUCT)
        np.testing.assert_allclose(y, x_host @ w, rtol=1e-4, atol=1e-3)
    print("retry ok")
"""


@pytest.mark.parametrize("how", ["eager", "jit"])
def test_a_full_disk_leaves_nothing_of_a_failed_op_and_a_retry_succeeds(small_filesystem, how):
    code = FULL_DISK.replace("PRODUCT", "x @ w" if how == "eager" else "step(x, w)")
    out = run_python(code, small_filesystem, small_filesystem, check=False)
    assert out.returncode == 0, out.stderr
    message, retried = out.stdout.splitlines()
    assert "(<folder>/from_in_memory-" in message and "No space left on device" in message, message
    assert retried == "retry ok"
    assert "Exception ignored" not in out.stderr, out.stderr  # no failure left for exit


def test_a_forked_child_exiting_normally_leaves_its_parents_arrays(tmp_path):
    out = run_python(
        """
        import os, sys, numpy as np, jask
        jask.set_memory_budget("64MB", scratch_dir=sys.argv[1])
        x = jask.DiskArray.from_numpy(np.ones(8, np.float32)) * 2.0
        pid = os.fork()
        if pid == 0:
            sys.exit(0)  # runs atexit in the child
        _, status = os.waitpid(pid, 0)
        print(os.WEXITSTATUS(status), float(np.asarray(x).sum()), sorted(os.listdir(jask.scratch_dir())))
        """,
        tmp_path,
        tmp_path,
    )
    status, total, files = out.stdout.split(maxsplit=2)
    assert (status, total) == ("0", "16.0")
    assert ".npy" in files, files  # x's file is still there
