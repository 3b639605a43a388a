"""Reads bench/corpus/manifest.json: the corpus's model names and the stamp that says whether an
export is current. Shared by export.py (which writes the models) and bench/ort_compare.py
--corpus (which runs them); it imports nothing heavy, so asking costs no torch import."""
import hashlib
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))
MANIFEST = os.path.join(HERE, "manifest.json")
# Bump when a builder in export.py changes what it exports, so cached exports are redone (an
# entry's own change is seen through its stamp).
EXPORT_VERSION = "gearbox-corpus-export-v1"


def load_manifest():
    with open(MANIFEST) as f:
        return json.load(f)


def expand(manifest=None):
    """[(model name, entry, batch)] in manifest order: NAME for batch 1, NAME_bB for batch B."""
    out = []
    for e in (manifest or load_manifest())["models"]:
        for b in e.get("batches", [1]):
            out.append((e["name"] if b == 1 else f"{e['name']}_b{b}", e, b))
    return out


def stamp_text(entry, batch):
    key = json.dumps({"entry": entry, "batch": batch}, sort_keys=True)
    return f"{EXPORT_VERSION} {hashlib.sha256(key.encode()).hexdigest()[:16]}"


def is_cached(out_dir, name, entry, batch):
    try:
        with open(os.path.join(out_dir, name, ".stamp")) as f:
            return f.read().strip() == stamp_text(entry, batch)
    except OSError:
        return False
