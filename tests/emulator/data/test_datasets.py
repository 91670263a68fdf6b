"""ipu_emulator.data.datasets: the bundled sample, the mode switch, the Keras cache, the patch.

No test touches the network: HOME and the Keras fallback cache point into tmp_path, and the
download is always replaced by a fake.
"""
import gzip
import importlib.resources
import os
import pickle
import socket
import sys
import warnings

import numpy as np
import pytest

# Legacy Keras is what the emulator runs on; ipu_emulator/__init__.py sets this too, but only
# if it runs before TensorFlow loads (and a stale editable install skips it altogether).
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

from ipu_emulator.data import datasets  # noqa: E402
from ipu_emulator.data.datasets import (  # noqa: E402
    SampleDataWarning, cifar10, cifar100, fashion_mnist, mnist)
from tests.support.child_python import child_env, run_python  # noqa: E402


@pytest.fixture(autouse=True)
def isolated(tmp_path, monkeypatch):
    """Fresh in-process state, an empty Keras cache and default mode for every test."""
    home = tmp_path / "home"
    (home / ".keras" / "datasets").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setattr(datasets, "_KERAS_FALLBACK_BASE", str(tmp_path / "tmp-keras"))
    monkeypatch.delenv(datasets.MODE_ENV_VAR, raising=False)
    datasets._clear_caches()
    datasets._reset_warnings_shown()
    yield home / ".keras" / "datasets"
    datasets._clear_caches()
    datasets._reset_warnings_shown()


@pytest.fixture
def keras_cache(isolated):
    return isolated


@pytest.fixture
def fake_download(monkeypatch):
    """Replaces Keras's downloader; records each call and the socket timeout in force."""
    calls = []

    def loader_for(name):
        def download(**kwargs):
            calls.append((name, socket.getdefaulttimeout()))
            raise OSError("no network in tests")
        return download

    monkeypatch.setattr(datasets, "_original_keras_loader", loader_for)
    return calls


def write_idx(path, array):
    """IDX file per the MNIST page: 0, 0, type code, ndim, big-endian uint32 dims, data."""
    codes = {np.dtype("u1"): 0x08, np.dtype(">i4"): 0x0C}
    header = bytes([0, 0, codes[array.dtype], array.ndim])
    header += b"".join(int(n).to_bytes(4, "big") for n in array.shape)
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "wb") as f:
        f.write(header + array.tobytes())


def tiny_dataset(n_train=3, n_test=2, fill=7):
    """A recognisably fake data set: `fill` everywhere, a handful of images."""
    images = lambda n: np.full((n, 28, 28), fill, np.uint8)
    labels = lambda n: np.arange(n, dtype=np.uint8)
    return (images(n_train), labels(n_train)), (images(n_test), labels(n_test))


def write_keras_mnist_cache(cache_dir, arrays):
    (x_train, y_train), (x_test, y_test) = arrays
    np.savez(cache_dir / "mnist.npz", x_train=x_train, y_train=y_train, x_test=x_test, y_test=y_test)


def write_keras_fashion_cache(cache_dir, arrays):
    folder = cache_dir / "fashion-mnist"
    folder.mkdir()
    (x_train, y_train), (x_test, y_test) = arrays
    write_idx(folder / "train-labels-idx1-ubyte.gz", y_train)
    write_idx(folder / "train-images-idx3-ubyte.gz", x_train)
    write_idx(folder / "t10k-labels-idx1-ubyte.gz", y_test)
    write_idx(folder / "t10k-images-idx3-ubyte.gz", x_test)


def no_sample_warnings(call):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = call()
    assert not [w for w in caught if issubclass(w.category, SampleDataWarning)]
    return result


# --- the bundled sample ------------------------------------------------------------------------

@pytest.mark.parametrize("name, licence", [("mnist", "CC BY-SA 3.0"),
                                           ("fashion_mnist", "MIT")])
def test_samples_are_found_as_package_data(name, licence):
    resource = datasets._sample_resource(name)
    assert resource.is_file() and resource.name == f"{name}_sample.npz"
    # Found through importlib.resources itself (the namespace-safe anchor is the data folder).
    data = importlib.resources.files("ipu_emulator.data")
    assert (data / f"{name}_sample.npz").read_bytes() == resource.read_bytes()
    readme = (data / "README.md").read_text()
    assert f"`{name}_sample.npz`" in readme and licence in readme


# (train size, test size, per-class train count, fraction of non-zero pixels)
SAMPLE_FACTS = {"mnist": (24000, 2500, 2400, (0.1, 0.3)),
                "fashion_mnist": (2500, 2500, 250, (0.35, 0.75))}


@pytest.mark.parametrize("dataset", [mnist, fashion_mnist], ids=["mnist", "fashion_mnist"])
def test_sample_has_keras_shapes_dtypes_and_ranges(dataset, monkeypatch):
    monkeypatch.setenv("IPU_EMULATOR_DATA", "sample")
    n_train, n_test, per_class, (low, high) = SAMPLE_FACTS[dataset.__name__.rsplit(".", 1)[1]]
    with pytest.warns(SampleDataWarning):
        (x_train, y_train), (x_test, y_test) = dataset.load_data()
    assert x_train.shape == (n_train, 28, 28) and x_test.shape == (n_test, 28, 28)
    assert y_train.shape == (n_train,) and y_test.shape == (n_test,)
    for array in (x_train, y_train, x_test, y_test):
        assert array.dtype == np.uint8
    assert x_train.max() == 255 and x_train.min() == 0
    # Real images: digits are mostly background with some ink, clothing fills more of the
    # frame; neither is noise nor blank.
    assert low < (x_train > 0).mean() < high
    assert set(np.unique(y_train)) == set(range(10)) == set(np.unique(y_test))
    assert np.bincount(y_train).tolist() == [per_class] * 10
    assert np.bincount(y_test).tolist() == [n_test // 10] * 10
    # Shuffled: a training batch must not be a single class.
    assert len(np.unique(y_train[:32])) > 5
    # Held out: no test image is also a training image.
    seen = {image.tobytes() for image in x_train}
    assert not any(image.tobytes() in seen for image in x_test)


@pytest.mark.parametrize("dataset", [mnist, fashion_mnist, cifar10],
                         ids=["mnist", "fashion_mnist", "cifar10"])
def test_every_split_fits_a_pipelined_two_replica_keras_script(dataset, monkeypatch):
    # An IPU Keras tutorial sizes its steps as len(split) // (batch 64 x 2 replicas), rounded
    # down to a multiple of the gradient accumulation count 8: never 0 on the samples.
    monkeypatch.setenv("IPU_EMULATOR_DATA", "sample")
    with pytest.warns(SampleDataWarning):
        (x_train, _), (x_test, _) = dataset.load_data()
    for split in (x_train, x_test):
        assert len(split) >= 2048
        steps = len(split) // (64 * 2)
        assert steps // 8 * 8 >= 16


def test_mnist_sample_fits_the_tensorboard_tutorials_validation_split(monkeypatch):
    # Graphcore's TF2 TensorBoard tutorial splits MNIST's training set 80/20 and validates for
    # 128 steps of 32 images with steps_per_execution=128: the IPU Keras data adapter needs 128
    # whole batches of the 20 % (4,000 training digits gave 25). Training takes whole engine
    # runs of 128 steps too.
    monkeypatch.setenv("IPU_EMULATOR_DATA", "sample")
    with pytest.warns(SampleDataWarning):
        (x_train, _), _ = mnist.load_data()
    split = int(0.8 * len(x_train))
    validation_batches = (len(x_train) - split) // 32
    assert validation_batches >= 128
    assert split // 32 // 128 >= 4
    assert (validation_batches, split // 32) == (150, 600)


def test_fashion_sample_is_clothing_not_digits(monkeypatch):
    # The two samples are different images; and a nearest-class-mean classifier fitted on
    # the Fashion-MNIST training split tells its test split's classes apart well above chance
    # (real clothing: a model learns it).
    monkeypatch.setenv("IPU_EMULATOR_DATA", "sample")
    with pytest.warns(SampleDataWarning):
        (digits, _), _ = mnist.load_data()
    with pytest.warns(SampleDataWarning):
        (x_train, y_train), (x_test, y_test) = fashion_mnist.load_data()
    assert abs(float((digits > 0).mean()) - float((x_train > 0).mean())) > 0.2
    x_train, x_test = x_train.reshape(len(x_train), -1) / 255.0, x_test.reshape(len(x_test), -1) / 255.0
    means = np.stack([x_train[y_train == c].mean(axis=0) for c in range(10)])
    nearest = np.argmin(((x_test[:, None, :] - means[None]) ** 2).sum(axis=-1), axis=1)
    assert (nearest == y_test).mean() > 0.6


def test_sample_mode_never_touches_network_or_keras_cache(keras_cache, monkeypatch):
    monkeypatch.setenv("IPU_EMULATOR_DATA", "sample")

    def refuse(*args, **kwargs):
        raise AssertionError("sample mode must not use the network")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(datasets, "_original_keras_loader", refuse)
    # Valid but recognisably fake cache files: if they were read, the shapes would show it.
    write_keras_mnist_cache(keras_cache, tiny_dataset())
    write_keras_fashion_cache(keras_cache, tiny_dataset())

    write_keras_cifar10_cache(keras_cache, tiny_cifar())

    with pytest.warns(SampleDataWarning):
        (x_train, _), _ = mnist.load_data()
    with pytest.warns(SampleDataWarning):
        (fashion_x_train, _), _ = fashion_mnist.load_data()
    assert x_train.shape == (24000, 28, 28) and fashion_x_train.shape == (2500, 28, 28)
    for loader in (cifar10.load_data, cifar100.load_data):
        with pytest.warns(SampleDataWarning):
            (cifar_x_train, _), _ = loader()
        assert cifar_x_train.shape == (5000, 32, 32, 3)


# --- CIFAR: a generated stand-in offline ---------------------------------------------------------

def tiny_cifar(n_train=5, n_test=2, fill=9):
    images = lambda n: np.full((n, 32, 32, 3), fill, np.uint8)
    labels = lambda n: np.arange(n, dtype=np.uint8).reshape(-1, 1)
    return (images(n_train), labels(n_train)), (images(n_test), labels(n_test))


def write_keras_cifar10_cache(cache_dir, arrays):
    """Keras's extracted CIFAR-10 cache: pickled batches of channels-first rows, bytes keys."""
    folder = cache_dir / "cifar-10-batches-py"
    folder.mkdir()
    (x_train, y_train), (x_test, y_test) = arrays

    def write(name, images, labels):
        rows = images.transpose(0, 3, 1, 2).reshape(len(images), -1)
        with open(folder / name, "wb") as f:
            pickle.dump({b"data": rows, b"labels": labels.ravel().tolist()}, f)
    for i in range(5):  # five training batches, in order
        write("data_batch_%d" % (i + 1), x_train[i::5], y_train[i::5])
    write("test_batch", x_test, y_test)


@pytest.mark.parametrize("loader, kwargs, classes", [
    (cifar10.load_data, {}, 10),
    (cifar100.load_data, {}, 100),
    (cifar100.load_data, {"label_mode": "coarse"}, 20),
], ids=["cifar10", "cifar100-fine", "cifar100-coarse"])
def test_cifar_stand_in_has_keras_shapes_and_dtypes(loader, kwargs, classes, monkeypatch):
    monkeypatch.setenv("IPU_EMULATOR_DATA", "sample")
    with pytest.warns(SampleDataWarning, match="generated CIFAR-10?0?-shaped stand-in"):
        (x_train, y_train), (x_test, y_test) = loader(**kwargs)
    assert x_train.shape == (5000, 32, 32, 3) and x_test.shape == (2500, 32, 32, 3)
    assert y_train.shape == (5000, 1) and y_test.shape == (2500, 1)
    for array in (x_train, y_train, x_test, y_test):
        assert array.dtype == np.uint8
    assert set(np.unique(y_train)) == set(range(classes)) == set(np.unique(y_test))
    assert len(np.unique(y_train[:32])) > 5  # shuffled
    # Not blank, not saturated, and the same on every machine (generated from a fixed seed).
    assert 60 < x_train.mean() < 200 and x_train.std() > 20
    datasets._clear_caches()
    (x_again, y_again), _ = loader(**kwargs)
    np.testing.assert_array_equal(x_again, x_train)
    np.testing.assert_array_equal(y_again, y_train)


def test_cifar_stand_in_classes_are_told_apart_by_their_pictures(monkeypatch):
    # A nearest-class-mean classifier on the training images beats chance on the test images
    # by far: the stand-in is learnable, so a CIFAR model's loss falls on it.
    monkeypatch.setenv("IPU_EMULATOR_DATA", "sample")
    with pytest.warns(SampleDataWarning):
        (x_train, y_train), (x_test, y_test) = cifar10.load_data()
    # The first 1,000 test images are plenty and keep the test quick.
    x_train, x_test = x_train.reshape(5000, -1) / 255.0, x_test[:1000].reshape(1000, -1) / 255.0
    y_test = y_test[:1000]
    means = np.stack([x_train[y_train[:, 0] == c].mean(axis=0) for c in range(10)])
    nearest = np.argmin(((x_test[:, None, :] - means[None]) ** 2).sum(axis=-1), axis=1)
    assert (nearest == y_test[:, 0]).mean() > 0.5


def test_cifar_offline_warnings_say_the_images_are_generated(fake_download):
    with pytest.warns(SampleDataWarning, match="CIFAR-10 not available offline") as shown:
        cifar10.load_data()
    assert "not photographs" in str(shown[0].message)
    assert "IPU_EMULATOR_DATA=full" in str(shown[0].message)
    assert fake_download == [("cifar10", datasets.AUTO_DOWNLOAD_TIMEOUT_S)]


def test_cifar100_label_mode_is_checked_as_keras_does():
    with pytest.raises(ValueError, match='`label_mode` must be one of `"fine"`, `"coarse"`. '
                                         'Received: label_mode=medium.'):
        cifar100.load_data(label_mode="medium")


@pytest.mark.parametrize("mode", ["auto", "full"])
def test_keras_cifar10_cache_is_read_without_download(mode, keras_cache, fake_download,
                                                      monkeypatch):
    monkeypatch.setenv("IPU_EMULATOR_DATA", mode)
    written = tiny_cifar(fill=9)
    written[0][0][:] = np.random.RandomState(1).randint(0, 256, (5, 32, 32, 3))
    write_keras_cifar10_cache(keras_cache, written)
    (x_train, y_train), (x_test, y_test) = no_sample_warnings(cifar10.load_data)
    assert x_train.shape == (5, 32, 32, 3) and x_test.shape == (2, 32, 32, 3)
    np.testing.assert_array_equal(x_train, written[0][0])  # channels last, in batch order
    assert (x_test == 9).all() and y_train.tolist() == [[0], [1], [2], [3], [4]]
    assert y_test.dtype == np.uint8 and y_test.shape == (2, 1)
    assert fake_download == []


def test_full_mode_cifar_propagates_download_errors(fake_download, monkeypatch):
    monkeypatch.setenv("IPU_EMULATOR_DATA", "full")
    with pytest.raises(OSError, match="no network in tests"):
        cifar100.load_data(label_mode="coarse")
    assert fake_download == [("cifar100", None)]


# --- the warning -------------------------------------------------------------------------------

def test_sample_warning_shows_once_per_process_per_dataset(monkeypatch):
    monkeypatch.setenv("IPU_EMULATOR_DATA", "sample")
    with pytest.warns(SampleDataWarning) as shown:
        mnist.load_data()
    assert len(shown) == 1
    assert "24,000 real MNIST training digits" in str(shown[0].message)
    no_sample_warnings(mnist.load_data)

    # Fashion-MNIST gets its own warning, naming its own sample.
    with pytest.warns(SampleDataWarning, match="instead of the full Fashion-MNIST") as shown:
        fashion_mnist.load_data()
    assert "2,500 real Fashion-MNIST training images" in str(shown[0].message)
    no_sample_warnings(fashion_mnist.load_data)

    datasets._reset_warnings_shown()
    with pytest.warns(SampleDataWarning):
        mnist.load_data()


def test_sample_warnings_are_one_line_each_on_stderr(tmp_path):
    # A real process, as a learner runs it: pytest's own warning capture would hide the format.
    script = ("from ipu_emulator.data.datasets import mnist, fashion_mnist\n"
              "mnist.load_data(); mnist.load_data()\n"
              "fashion_mnist.load_data(); fashion_mnist.load_data()\n")
    # child_env: no PYTHONWARNINGS from the shell, IPU_EMULATOR_DATA=sample.
    finished = run_python(script, cwd=tmp_path, env=child_env(HOME=tmp_path), timeout=120).check()
    assert finished.stderr.splitlines() == [
        "ipu_emulator: IPU_EMULATOR_DATA=sample; using the bundled sample of 24,000 real "
        "MNIST training digits instead of the full MNIST.",
        "ipu_emulator: IPU_EMULATOR_DATA=sample; using the bundled sample of 2,500 real "
        "Fashion-MNIST training images instead of the full Fashion-MNIST.",
    ]


def test_one_line_format_is_only_for_the_sample_warning(monkeypatch):
    monkeypatch.setenv("IPU_EMULATOR_DATA", "sample")
    before = warnings.formatwarning
    with pytest.warns(SampleDataWarning):
        mnist.load_data()
    assert warnings.formatwarning is before


# --- mode switch -------------------------------------------------------------------------------

@pytest.mark.parametrize("value", ["offline", "samples", "1"])
def test_invalid_mode_names_the_allowed_values(value, monkeypatch):
    monkeypatch.setenv("IPU_EMULATOR_DATA", value)
    with pytest.raises(ValueError, match="IPU_EMULATOR_DATA.*sample, full, auto"):
        mnist.load_data()


def test_mode_defaults_to_auto_and_ignores_case(monkeypatch):
    assert datasets.data_mode() == "auto"
    monkeypatch.setenv("IPU_EMULATOR_DATA", " Sample ")
    assert datasets.data_mode() == "sample"


# --- caching and copies ------------------------------------------------------------------------

def test_returned_arrays_are_independent_copies(monkeypatch):
    monkeypatch.setenv("IPU_EMULATOR_DATA", "sample")
    with pytest.warns(SampleDataWarning):
        (x_train, y_train), (x_test, y_test) = mnist.load_data()
    expected_sum = int(x_train.sum(dtype=np.int64))
    x_train[...] = 0
    y_train[...] = 99
    x_test += 1
    (x_again, y_again), (x_test_again, _) = mnist.load_data()
    assert int(x_again.sum(dtype=np.int64)) == expected_sum
    assert y_again.max() == 9
    assert not np.shares_memory(x_again, x_train)
    assert x_test_again.min() == 0
    # Fashion-MNIST's sample is handed out as copies too.
    with pytest.warns(SampleDataWarning):
        (fashion_x, _), _ = fashion_mnist.load_data()
    fashion_x[...] = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SampleDataWarning)
        (fashion_again, _), _ = fashion_mnist.load_data()
    assert fashion_again.max() == 255


def test_a_checks_digits_are_the_samples_first_scaled_and_its_own_copies(monkeypatch):
    """code_exercises.sample_digits keeps the first digits per count (a check's runs read them
    again and again): each caller still gets arrays of its own, the sample's whatever the
    notebook's data mode, and no warning."""
    from ipu_emulator.code_exercises import sample_digits

    monkeypatch.setenv("IPU_EMULATOR_DATA", "full")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        images, labels = sample_digits(64)
        images[...] = -1
        labels[...] = 99
        again, labels_again = sample_digits(64)
    (x_train, y_train), _ = datasets._sample()
    assert again.dtype == np.float32 and labels_again.dtype == np.int32
    np.testing.assert_array_equal(again, (x_train[:64] / 255).astype(np.float32))
    np.testing.assert_array_equal(labels_again, y_train[:64])
    assert not np.shares_memory(again, images)
    assert os.environ["IPU_EMULATOR_DATA"] == "full"


# --- real data: Keras cache and download -------------------------------------------------------

@pytest.mark.parametrize("mode", ["auto", "full"])
def test_keras_mnist_cache_is_used_without_download(mode, keras_cache, fake_download, monkeypatch):
    monkeypatch.setenv("IPU_EMULATOR_DATA", mode)
    write_keras_mnist_cache(keras_cache, tiny_dataset(fill=7))
    (x_train, y_train), (x_test, _) = no_sample_warnings(mnist.load_data)
    assert x_train.shape == (3, 28, 28) and x_test.shape == (2, 28, 28)
    assert (x_train == 7).all() and y_train.tolist() == [0, 1, 2]
    assert fake_download == []


def test_keras_fashion_cache_is_parsed_from_idx_files(keras_cache, fake_download, monkeypatch):
    monkeypatch.setenv("IPU_EMULATOR_DATA", "full")
    write_keras_fashion_cache(keras_cache, tiny_dataset(n_train=4, n_test=3, fill=200))
    (x_train, y_train), (x_test, y_test) = fashion_mnist.load_data()
    assert x_train.shape == (4, 28, 28) and x_train.dtype == np.uint8 and (x_train == 200).all()
    assert y_train.tolist() == [0, 1, 2, 3] and y_test.tolist() == [0, 1, 2]
    assert x_test.shape == (3, 28, 28)
    assert fake_download == []


def test_keras_cache_under_tmp_fallback_is_found(tmp_path, fake_download, monkeypatch):
    # Keras downloads to /tmp/.keras when ~/.keras is not writable.
    monkeypatch.setenv("IPU_EMULATOR_DATA", "full")
    fallback = tmp_path / "tmp-keras" / "datasets"
    fallback.mkdir(parents=True)
    write_keras_mnist_cache(fallback, tiny_dataset(fill=3))
    (x_train, _), _ = mnist.load_data()
    assert (x_train == 3).all()


def test_auto_falls_back_to_sample_when_download_fails(fake_download):
    with pytest.warns(SampleDataWarning, match="MNIST not available offline") as shown:
        (x_train, _), _ = mnist.load_data()
    assert x_train.shape == (24000, 28, 28)
    assert len(shown) == 1
    assert "IPU_EMULATOR_DATA=full" in str(shown[0].message)
    # The download ran under the short timeout, and the previous default came back.
    assert fake_download == [("mnist", datasets.AUTO_DOWNLOAD_TIMEOUT_S)]
    assert socket.getdefaulttimeout() is None
    # A failed download is not retried (another 10 s wait) on every call.
    no_sample_warnings(mnist.load_data)
    assert len(fake_download) == 1


def test_auto_fashion_fallback_serves_the_fashion_sample(fake_download):
    with pytest.warns(SampleDataWarning, match="Fashion-MNIST not available offline") as shown:
        (x_train, _), _ = fashion_mnist.load_data()
    assert "real Fashion-MNIST training images" in str(shown[0].message)
    assert x_train.shape == (2500, 28, 28)
    assert fake_download == [("fashion_mnist", datasets.AUTO_DOWNLOAD_TIMEOUT_S)]


def test_full_mode_propagates_download_errors_and_never_substitutes(fake_download, monkeypatch):
    monkeypatch.setenv("IPU_EMULATOR_DATA", "full")
    with warnings.catch_warnings():
        warnings.simplefilter("error", SampleDataWarning)
        with pytest.raises(OSError, match="no network in tests"):
            mnist.load_data()
        with pytest.raises(OSError):
            fashion_mnist.load_data()
    # No timeout in full mode: a slow real download is allowed to finish.
    assert fake_download == [("mnist", None), ("fashion_mnist", None)]


def test_damaged_keras_cache_is_refetched_by_keras(keras_cache, monkeypatch):
    monkeypatch.setenv("IPU_EMULATOR_DATA", "full")
    (keras_cache / "mnist.npz").write_bytes(b"not an npz")
    monkeypatch.setattr(datasets, "_original_keras_loader",
                        lambda name: lambda **kwargs: tiny_dataset(fill=9))
    (x_train, _), _ = mnist.load_data()
    assert (x_train == 9).all()


# --- IDX parser --------------------------------------------------------------------------------

@pytest.mark.parametrize("filename", ["tiny-idx3-ubyte", "tiny-idx3-ubyte.gz"])
def test_idx_reader_reads_what_was_written(tmp_path, filename):
    images = np.arange(2 * 3 * 4, dtype=np.uint8).reshape(2, 3, 4)
    write_idx(tmp_path / filename, images)
    read = datasets._read_idx(tmp_path / filename)
    assert read.dtype == np.uint8 and read.shape == (2, 3, 4)
    np.testing.assert_array_equal(read, images)
    read[0, 0, 0] = 255  # writable: callers may modify what they get


def test_idx_reader_handles_big_endian_ints(tmp_path):
    values = np.array([1, -2, 70000], dtype=">i4")
    write_idx(tmp_path / "ints-idx1", values)
    read = datasets._read_idx(tmp_path / "ints-idx1")
    assert read.tolist() == [1, -2, 70000] and read.dtype == np.dtype("int32")


def test_idx_reader_rejects_bad_header_and_truncated_data(tmp_path):
    (tmp_path / "bad").write_bytes(b"\x1f\x8b\x08\x00 not idx")
    with pytest.raises(ValueError, match="not an IDX file"):
        datasets._read_idx(tmp_path / "bad")
    write_idx(tmp_path / "whole", np.zeros((2, 2), np.uint8))
    (tmp_path / "cut").write_bytes((tmp_path / "whole").read_bytes()[:-1])
    with pytest.raises(ValueError, match="header"):
        datasets._read_idx(tmp_path / "cut")


# --- patching tf.keras -------------------------------------------------------------------------

@pytest.fixture
def patched_keras():
    """patch_keras_datasets(), undone afterwards so other tests see stock Keras."""
    datasets.patch_keras_datasets()
    yield
    ours = {"mnist": mnist.load_data, "fashion_mnist": fashion_mnist.load_data,
            "cifar10": cifar10.load_data, "cifar100": cifar100.load_data}
    for module in list(sys.modules.values()):
        namespace = getattr(module, "__dict__", None)
        for name, loader in ours.items():
            if isinstance(namespace, dict) and namespace.get("load_data") is loader:
                module.load_data = datasets._original_keras_loaders[name]


def test_patched_tf_keras_returns_the_sample(monkeypatch, patched_keras):
    import tensorflow as tf

    monkeypatch.setenv("IPU_EMULATOR_DATA", "sample")
    datasets.patch_keras_datasets()  # idempotent: a second call changes nothing
    assert tf.keras.datasets.fashion_mnist.load_data is fashion_mnist.load_data
    assert tf.compat.v1.keras.datasets.mnist.load_data is mnist.load_data

    with pytest.warns(SampleDataWarning, match="Fashion-MNIST"):
        (x_train, y_train), (x_test, _) = tf.keras.datasets.fashion_mnist.load_data()
    assert x_train.shape == (2500, 28, 28) and x_train.dtype == np.uint8
    assert x_test.shape == (2500, 28, 28) and y_train.dtype == np.uint8
    (x_v1, _), _ = tf.compat.v1.keras.datasets.fashion_mnist.load_data()
    np.testing.assert_array_equal(x_v1, x_train)

    assert tf.keras.datasets.cifar10.load_data is cifar10.load_data
    assert tf.compat.v1.keras.datasets.cifar100.load_data is cifar100.load_data
    with pytest.warns(SampleDataWarning, match="CIFAR-100"):
        (x_cifar, y_cifar), _ = tf.keras.datasets.cifar100.load_data(label_mode="coarse")
    assert x_cifar.shape == (5000, 32, 32, 3) and y_cifar.max() == 19

    # Keras's own loader is kept for real downloads, and is not our replacement.
    original = datasets._original_keras_loaders["mnist"]
    assert original.__module__ == "tf_keras.src.datasets.mnist"
