"""examples/kjv_skipgram.py for a few steps: the same tables' SHA-256 at 1 and 2 threads,
on the Serial backend, over 1, 4 and 16 microbatches, and with torch.nn.Embedding
without accumulation; torch's own accumulation over 4 microbatches gives other bits."""
import re

import pytest

from conftest import REPO, python, need_torch

need_torch()
EXAMPLE = str(REPO / "examples" / "kjv_skipgram.py")


def sha(*args):
    out = python(EXAMPLE, "--steps", "4", "--pairs", "2048", *args)
    assert out.returncode == 0, out.stderr
    found = re.search(r"tables SHA-256 ([0-9a-f]{64})", out.stdout)
    assert found, out.stdout
    return found.group(1)


def test_the_example_ends_with_the_same_tables_however_it_runs():
    want = sha()
    for args in (["--threads", "1"], ["--threads", "2"], ["--backend", "serial"], ["--microbatches", "4"],
                 ["--microbatches", "16"], ["--embedding", "torch"]):
        assert sha(*args) == want, args
    assert sha("--embedding", "torch", "--microbatches", "4") != want  # torch adds microbatches' folds


def test_the_example_refuses_bad_arguments():
    out = python(EXAMPLE, "--microbatches", "0")
    assert out.returncode != 0 and "--microbatches must be between 1 and" in out.stderr


@pytest.mark.parametrize("optimizer", ["adam", "rowwise_adagrad"])
def test_a_hundred_steps_of_a_kembed_optimizer_end_with_the_same_tables(optimizer):
    def sha100(*args):
        return sha("--steps", "100", "--pairs", "512", "--optimizer", optimizer, *args)
    want = sha100()
    for args in (["--threads", "1"], ["--threads", "2"], ["--backend", "serial"], ["--microbatches", "4"],
                 ["--microbatches", "16"]):
        assert sha100(*args) == want, args
