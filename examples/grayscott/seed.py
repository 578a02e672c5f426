"""Writes the Gray-Scott start state: u = 1 and v = 0 everywhere but a seeded box through the
middle planes (u = 0.5, v = 0.25, with a little noise to break the symmetry).
Usage: seed.py NX NY NZ OUT_DIR  (writes OUT_DIR/u.npy and OUT_DIR/v.npy, float32)"""
import sys

import numpy as np

nx, ny, nz = (int(a) for a in sys.argv[1:4])
out = sys.argv[4]
rng = np.random.default_rng(7)
u = np.ones((nz, ny, nx), np.float32)
v = np.zeros((nz, ny, nx), np.float32)
box = (slice(nz // 2 - 4, nz // 2 + 4), slice(ny // 2 - 8, ny // 2 + 8), slice(nx // 2 - 8, nx // 2 + 8))
u[box] = 0.5 + 0.02 * rng.random(u[box].shape)
v[box] = 0.25 + 0.02 * rng.random(v[box].shape)
np.save(f"{out}/u.npy", u)
np.save(f"{out}/v.npy", v)
