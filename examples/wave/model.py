"""Two-layer velocity model as the wave scheme's coefficient m = (v dt / h)^2."""
import sys

import numpy as np

nz, ny, nx = 120, 96, 160
h, dt = 10.0, 1e-3  # metres, seconds
v = np.full((nz, ny, nx), 1500.0)  # water-like upper layer
v[60:] = 3000.0  # faster rock below z = 60
np.save(sys.argv[1], ((v * dt / h) ** 2).astype(np.float32))
