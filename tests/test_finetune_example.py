"""examples/finetune_safetensors.py fine-tunes a sharded safetensors checkpoint larger than the budget."""

import re

import numpy as np
from safetensors import safe_open
from test_train_example import run_example


def test_finetune_lowers_the_loss_and_saves_what_it_trained(tmp_path):
    final = tmp_path / "final.npz"
    out = run_example(
        "finetune_safetensors.py",
        tmp_path,
        *("--inputs", "12", "--hidden", "48", "--outputs", "3", "--layers", "4"),
        *("--steps", "20", "--batch-size", "64", "--learning-rate", "1e-2"),
        *("--budget", "16KB", "--shard-size", "8KB"),
        *("--dir", str(tmp_path), "--dump-final", str(final)),
    )
    assert "forward pass matches" in out.stdout and "loss fell from" in out.stdout
    losses = [float(v) for v in re.findall(r"^step \d+: loss = (\S+)$", out.stdout, re.M)]
    assert len(losses) == 20 and losses[-1] < 0.5 * losses[0]
    header = next(line for line in out.stdout.splitlines() if line.startswith("checkpoint:"))
    nbytes = int(re.search(r"([\d,]+) bytes in (\d+) shards", header).group(1).replace(",", ""))
    assert nbytes > 16 * 1024  # the weights are larger than the budget
    assert int(re.search(r"in (\d+) shards", header).group(1)) > 1

    trained = np.load(final)
    tuned = tmp_path / "finetuned"
    read = {}
    for shard in sorted(tuned.glob("*.safetensors")):
        with safe_open(str(shard), "np") as f:
            read |= {name: f.get_tensor(name) for name in f.keys()}
    assert len(list(tuned.glob("*.safetensors"))) > 1
    assert sorted(read) == sorted(trained.files) and len(read) == 8
    for name in trained.files:
        assert read[name].dtype == trained[name].dtype == np.float32
        np.testing.assert_array_equal(read[name], trained[name], err_msg=name)
    with safe_open(str(sorted(tuned.glob("*.safetensors"))[0]), "np") as f:
        assert f.metadata() == {"format": "np"}
