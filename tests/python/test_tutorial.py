"""docs/python.md works as written: its python blocks run in order in a fresh directory."""

import os
import re

import matplotlib

DOC = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "python.md")


def test_tutorial_runs(tmp_path, monkeypatch):
    matplotlib.use("Agg")
    blocks = re.findall(r"```python\n(.*?)```", open(DOC).read(), flags=re.S)
    assert len(blocks) >= 6
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    for i, block in enumerate(blocks):
        exec(compile(block, f"docs/python.md block {i + 1}", "exec"), namespace)
    assert (tmp_path / "heat.png").stat().st_size > 0
    assert namespace["calls"] == [2, 4, 6, 8, 10]
    assert namespace["g"].step == 75  # (65 before the snapshots' run of 10 steps)
    movie = sorted(os.listdir(tmp_path / "heat-movie"))
    assert movie[0] == "series.vtkhdf" and len(movie) == 4  # steps 65 (the start), 70, 75
