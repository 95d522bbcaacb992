"""The README's Python examples are the README's text, and they run as shown."""
import re

import pytest

from conftest import REPO, need_torch


def readme_examples():
    text = (REPO / "README.md").read_text()
    section = text.split("## Python and PyTorch", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, re.S)


def test_the_readme_has_a_numpy_and_a_torch_example():
    blocks = readme_examples()
    assert len(blocks) == 2
    assert "import numpy as np, kembed" in blocks[0] and "import torch, kembed.torch" in blocks[1]


@pytest.mark.parametrize("index", [0, 1])
def test_the_readme_example_runs(index):
    if index == 1:
        need_torch()
    scope = {}
    exec(compile(readme_examples()[index], f"README.md python block {index + 1}", "exec"), scope)
    if index == 0:
        import numpy as np
        assert scope["grad"].shape == (1000, 64)
        assert (scope["grad"][1:4] == 2.0).all() and (scope["grad"][4:] == 0).all()
