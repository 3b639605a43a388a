#!/usr/bin/env python3
"""Writes sklearn's bundled digits data set (1,797 real 8x8 handwritten digits, Debian's
python3-sklearn; no download) as DIR/x.npy (float32 [1797, 64], pixels / 16) and DIR/y.npy
(int64 [1797] class ids), for examples/train_mlp.cc."""
import os
import sys

import numpy as np
from sklearn.datasets import load_digits

out = sys.argv[1] if len(sys.argv) > 1 else "digits"
os.makedirs(out, exist_ok=True)
d = load_digits()
np.save(os.path.join(out, "x.npy"), (d.data / 16.0).astype(np.float32))
np.save(os.path.join(out, "y.npy"), d.target.astype(np.int64))
print(f"wrote {out}/x.npy {d.data.shape} and {out}/y.npy")
