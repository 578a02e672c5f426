"""Traces recorded by `deepgrid run --traces` as a wiggle plot: one line per receiver."""
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

t = np.load(sys.argv[1])  # (steps, receivers)
fig, ax = plt.subplots(figsize=(6, 4))
steps = np.arange(1, t.shape[0] + 1)
for r in range(t.shape[1]):
    peak = max(np.nanmax(np.abs(t[:, r])), 1e-30)
    ax.plot(r + 0.45 * t[:, r] / peak, steps, lw=0.8, color="k")
ax.invert_yaxis()
ax.set_xlabel("receiver (10 cells apart, offset 10 to 100 cells)")
ax.set_ylabel("time step (1 ms)")
ax.set_title("traces, each normalised: direct wave, then the layer's reflection")
fig.tight_layout()
fig.savefig(sys.argv[2], dpi=100)
