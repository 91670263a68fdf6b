"""Build ipu_emulator/data/fashion_mnist_sample.npz: 2,500 train / 2,500 test real Fashion-MNIST
images, from Debian's package `dataset-fashion-mnist`.

    apt-get download dataset-fashion-mnist        # dataset-fashion-mnist_0.0~git20200523.55506a9-1_all.deb
    python scripts/make_fashion_mnist_sample.py --deb dataset-fashion-mnist_*.deb

The package need not be installed: its data archive is read straight out of the .deb (an `ar`
archive holding `data.tar.xz`), and the four IDX files of
/usr/share/datasets/fashion-mnist/ are read from there. Pixel values are unchanged.

250 images of each class are drawn (fixed seed) from Fashion-MNIST's training file for the
training split and 250 of each class from its test file for the test split, so the two splits
share no image, as in the full data set; each split is shuffled, because sorted data would hand
a training loop single-class batches. Both splits hold at least 2,048 images, so that a script
sizing its steps from a split, len(split) // (batch 64 x 2 replicas) rounded down to a multiple
of 8, gets a whole number of steps; 2,500 keeps the file near 2 MB (clothing compresses to about
430 bytes an image, digits to 160).

The output is byte-for-byte reproducible (fixed zip timestamps), so re-running it leaves git
clean.
"""
import argparse
import hashlib
import io
import pathlib
import sys
import tarfile

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from ipu_emulator.data.datasets import _read_idx_bytes  # noqa: E402
from scripts.make_mnist_sample import stratified_pick, write_reproducible_npz  # noqa: E402

DEFAULT_DEB = "/tmp/fm/dataset-fashion-mnist_0.0~git20200523.55506a9-1_all.deb"
DEFAULT_OUTPUT = (pathlib.Path(__file__).resolve().parents[1] / "ipu_emulator" / "data"
                  / "fashion_mnist_sample.npz")
IDX_FOLDER = "./usr/share/datasets/fashion-mnist/"
FILES = {"x_train": "train-images-idx3-ubyte.gz", "y_train": "train-labels-idx1-ubyte.gz",
         "x_test": "t10k-images-idx3-ubyte.gz", "y_test": "t10k-labels-idx1-ubyte.gz"}
PER_CLASS = 250
SEED = 0


def ar_members(raw):
    """The members of an `ar` archive (the .deb container): {name: bytes}."""
    if not raw.startswith(b"!<arch>\n"):
        raise ValueError("not an ar archive")
    members, offset = {}, 8
    while offset + 60 <= len(raw):
        header = raw[offset:offset + 60]
        name = header[:16].decode().strip().rstrip("/")
        size = int(header[48:58].decode().strip())
        members[name] = raw[offset + 60:offset + 60 + size]
        offset += 60 + size + (size % 2)
    return members


def read_deb(deb_path):
    """Return ({key: array} for the four IDX files, sha256 of the .deb)."""
    raw = pathlib.Path(deb_path).read_bytes()
    data = ar_members(raw)["data.tar.xz"]
    arrays = {}
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        for key, name in FILES.items():
            arrays[key] = _read_idx_bytes(tar.extractfile(IDX_FOLDER + name).read(), gzipped=True,
                                          path=name)
    return arrays, hashlib.sha256(raw).hexdigest()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--deb", default=DEFAULT_DEB, help="path to dataset-fashion-mnist's .deb")
    parser.add_argument("--output", default=str(DEFAULT_OUTPUT), help="npz file to write")
    args = parser.parse_args()

    arrays, deb_sha256 = read_deb(args.deb)
    rng = np.random.default_rng(SEED)
    out = {}
    for split in ("train", "test"):
        pick = stratified_pick(arrays[f"y_{split}"], PER_CLASS, rng)
        out[f"x_{split}"] = arrays[f"x_{split}"][pick]
        out[f"y_{split}"] = arrays[f"y_{split}"][pick]
    output = pathlib.Path(args.output)
    write_reproducible_npz(output, out)
    print(f"source {pathlib.Path(args.deb).name} sha256 {deb_sha256}")
    print(f"wrote {output}: {len(out['x_train'])} train / {len(out['x_test'])} test, "
          f"{output.stat().st_size:,} bytes")


if __name__ == "__main__":
    main()
