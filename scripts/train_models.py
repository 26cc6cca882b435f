"""Rebuild srift/data/models/*.json from ../shared/data (same as `srift train`)."""
from __future__ import annotations

import argparse

from srift.learn.train import MODELS_DIR, train_all

if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--reprofile", action="store_true", help="re-profile the data's models on meta first")
    args = ap.parse_args()
    train_all(MODELS_DIR, verbose=True, reprofile=args.reprofile)
