"""MNIST, Fashion-MNIST, CIFAR-10 and CIFAR-100 loaders that also work offline.

    from ipu_emulator.data.datasets import mnist
    (x_train, y_train), (x_test, y_test) = mnist.load_data()   # Keras shapes and dtypes

The environment variable IPU_EMULATOR_DATA picks where the data comes from:

    auto    (default) the Keras cache (~/.keras/datasets) if present, else a download with a
            short timeout, else the bundled sample
    full    the real data set only: Keras cache or download; errors propagate
    sample  the bundled sample only; never touches the network or the Keras cache

The bundled samples (ipu_emulator/data/, see its README.md): mnist_sample.npz, 24,000 train /
2,500 test real MNIST digits (enough for an 80/20 split validated for 128 steps of 32, as
Graphcore's TF2 TensorBoard tutorial does); fashion_mnist_sample.npz, 2,500 train / 2,500
test real Fashion-MNIST images. No package ships CIFAR, so its sample is generated here
(deterministically, no network): 5,000 train / 2,500 test 32x32 RGB images of class-coloured
stripes and noise, with Keras's shapes and dtypes, so CIFAR models build and learn something,
but the images are not photographs. Every test split holds at least 2,048 images, so that a
script sizing its steps from it (len(test) // (batch 64 x 2 replicas), rounded down to a
multiple of the gradient accumulation count 8) gets a whole number of steps. Whenever a sample
stands in, a one-line SampleDataWarning says so (once per process and data set).

`patch_keras_datasets()` routes tf.keras.datasets.{mnist,fashion_mnist,cifar10,cifar100}
.load_data (legacy Keras, i.e. tf_keras) through these loaders so that unmodified tutorial
scripts run offline.

Only numpy is imported here; TensorFlow loads only when a download is attempted or Keras
is patched.
"""
import contextlib
import gzip
import importlib
import importlib.resources
import os
import pathlib
import pickle
import socket
import sys
import types
import warnings

import numpy as np

MODE_ENV_VAR = "IPU_EMULATOR_DATA"
MODES = ("sample", "full", "auto")
# In auto mode an offline machine should fall back quickly instead of hanging in a download.
AUTO_DOWNLOAD_TIMEOUT_S = 10.0

# The bundled samples, by data set name (ipu_emulator/data/README.md: sources and licences).
_SAMPLE_RESOURCES = {"mnist": "mnist_sample.npz", "fashion_mnist": "fashion_mnist_sample.npz"}
# In the order Keras lists them; the images/labels pairing is by name, not position.
_FASHION_MNIST_FILES = {
    "y_train": "train-labels-idx1-ubyte.gz",
    "x_train": "train-images-idx3-ubyte.gz",
    "y_test": "t10k-labels-idx1-ubyte.gz",
    "x_test": "t10k-images-idx3-ubyte.gz",
}
# Keras's CIFAR cache: the extracted folder (its files, in Keras's order) next to the archive.
_CIFAR_FILES = {
    "cifar10": ("cifar-10-batches-py", ["data_batch_%d" % i for i in range(1, 6)],
                ["test_batch"]),
    "cifar100": ("cifar-100-python", ["train"], ["test"]),
}
# The generated CIFAR stand-in: sizes and the seed that makes it the same on every machine.
CIFAR_SAMPLE_SIZES = (5000, 2500)
_CIFAR_SAMPLE_SEED = 1234
# Keras downloads to ~/.keras, or here when ~/.keras is not writable (tf_keras get_file).
_KERAS_FALLBACK_BASE = os.path.join("/tmp", ".keras")
# IDX type codes (http://yann.lecun.com/exdb/mnist/, "THE IDX FILE FORMAT"); big-endian.
_IDX_DTYPES = {0x08: "u1", 0x09: "i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}


class SampleDataWarning(UserWarning):
    """A small sample is being used instead of the requested full data set."""


# In-process state. Cached arrays are handed out as copies, so callers may edit them.  The
# bundled samples are not cached: read afresh (about 0.1 s), so a notebook that keeps a slice of
# one holds only that slice (the MNIST sample is 21 MB of pixels).
_cifar_samples = {}          # (data set name, label mode) -> generated stand-in arrays
_real_arrays = {}            # (data set name, loader arguments...) -> arrays
_failed_downloads = set()    # data sets whose auto-mode download failed: don't wait again
_warned = set()              # data sets whose sample warning was shown
_original_keras_loaders = {}  # data set name -> tf_keras's own load_data, kept before patching


def data_mode():
    """The data mode from IPU_EMULATOR_DATA: 'sample', 'full' or 'auto' (the default)."""
    value = os.environ.get(MODE_ENV_VAR, "")
    mode = value.strip().lower() or "auto"
    if mode not in MODES:
        raise ValueError(
            f"{MODE_ENV_VAR}={value!r} is not a valid data mode; use one of: {', '.join(MODES)}")
    return mode


# ---------------------------------------------------------------------------------------------
# Public loaders: same names and signatures as tf.keras.datasets.{mnist,fashion_mnist}.

def _mnist_load_data(path="mnist.npz", cache_dir=None):
    """Loads MNIST as `(x_train, y_train), (x_test, y_test)`: uint8 (N,28,28) images, uint8 (N,)
    labels. Where the data comes from depends on IPU_EMULATOR_DATA (see ipu_emulator.data.datasets)."""
    return _load_data(
        "mnist",
        cache_key=(path, cache_dir),
        find_cache=lambda: _find_keras_cache([path], cache_dir),
        read_cache=lambda files: _read_mnist_npz(files[0]),
        download=lambda: _original_keras_loader("mnist")(path=path, cache_dir=cache_dir),
    )


def _fashion_mnist_load_data(cache_dir=None):
    """Loads Fashion-MNIST as `(x_train, y_train), (x_test, y_test)`. Offline it returns the
    bundled sample of real Fashion-MNIST images and warns; see ipu_emulator.data.datasets."""
    return _load_data(
        "fashion_mnist",
        cache_key=(cache_dir,),
        find_cache=lambda: _find_keras_cache(
            [os.path.join("fashion-mnist", f) for f in _FASHION_MNIST_FILES.values()], cache_dir),
        read_cache=_read_fashion_mnist_gz,
        download=lambda: _original_keras_loader("fashion_mnist")(cache_dir=cache_dir),
    )


def _cifar10_load_data(cache_dir=None):
    """Loads CIFAR-10 as `(x_train, y_train), (x_test, y_test)`: uint8 (N,32,32,3) images, uint8
    (N,1) labels. Offline it returns a small generated stand-in and warns; see
    ipu_emulator.data.datasets."""
    return _load_cifar("cifar10", cache_dir, label_key="labels", keras_kwargs={})


def _cifar100_load_data(label_mode="fine", cache_dir=None):
    """Loads CIFAR-100 (`label_mode` "fine": 100 classes, or "coarse": 20) like Keras. Offline
    it returns a small generated stand-in and warns; see ipu_emulator.data.datasets."""
    if label_mode not in ["fine", "coarse"]:
        # Keras's own check and message.
        raise ValueError('`label_mode` must be one of `"fine"`, `"coarse"`. '
                         f"Received: label_mode={label_mode}.")
    return _load_cifar("cifar100", cache_dir, label_key=label_mode + "_labels",
                       keras_kwargs={"label_mode": label_mode}, label_mode=label_mode)


def _load_cifar(name, cache_dir, label_key, keras_kwargs, label_mode="fine"):
    folder, train_files, test_files = _CIFAR_FILES[name]
    relative = [os.path.join(folder, f) for f in train_files + test_files]
    return _load_data(
        name,
        cache_key=(cache_dir, label_key),
        find_cache=lambda: _find_keras_cache(relative, cache_dir),
        read_cache=lambda files: _read_cifar_batches(files[:len(train_files)],
                                                     files[len(train_files):], label_key),
        download=lambda: _original_keras_loader(name)(cache_dir=cache_dir, **keras_kwargs),
        sample=lambda: _copies(_cifar_sample(name, label_mode)),
    )


for _loader in (_mnist_load_data, _fashion_mnist_load_data, _cifar10_load_data,
                _cifar100_load_data):
    _loader._ipu_emulator_loader = True


def _module_like(name, load_data):
    module = types.ModuleType(f"{__name__}.{name}", load_data.__doc__)
    # "mnist.load_data" in this module: reads well in reprs and tracebacks, and pickle finds it.
    load_data.__name__, load_data.__qualname__ = "load_data", f"{name}.load_data"
    module.load_data = load_data
    return module


mnist = _module_like("mnist", _mnist_load_data)
fashion_mnist = _module_like("fashion_mnist", _fashion_mnist_load_data)
cifar10 = _module_like("cifar10", _cifar10_load_data)
cifar100 = _module_like("cifar100", _cifar100_load_data)


# ---------------------------------------------------------------------------------------------
# Choosing the source

def _load_data(name, cache_key, find_cache, read_cache, download, sample=None):
    """`sample()` gives the stand-in arrays (default: the data set's bundled sample)."""
    sample = sample or (lambda: _sample(name))
    mode = data_mode()
    if mode == "sample":
        return _substitute_sample(name, sample, forced=True)
    try:
        arrays = _load_real(name, cache_key, find_cache, read_cache, download,
                            timeout=AUTO_DOWNLOAD_TIMEOUT_S if mode == "auto" else None)
    except Exception:
        if mode == "full":
            raise
        return _substitute_sample(name, sample, forced=False)
    return _copies(arrays)


def _load_real(name, cache_key, find_cache, read_cache, download, timeout):
    """The real data set from the Keras cache, else downloaded. `timeout` set means auto mode:
    bounded wait, and a failed download is not retried in this process."""
    key = (name, *cache_key)
    if key in _real_arrays:
        return _real_arrays[key]
    arrays = None
    files = find_cache()
    if files is not None:
        try:
            arrays = read_cache(files)
        except Exception:
            # A damaged cache file: Keras's own loader checks it and fetches a fresh copy.
            arrays = None
    if arrays is None:
        if timeout is None:
            arrays = download()
        elif name in _failed_downloads:
            raise RuntimeError(f"{name}: download already failed in this process")
        else:
            try:
                with _default_socket_timeout(timeout):
                    arrays = download()
            except Exception:
                _failed_downloads.add(name)
                raise
    _real_arrays[key] = arrays
    return arrays


@contextlib.contextmanager
def _default_socket_timeout(seconds):
    # Keras downloads with urllib, which uses the process-wide default socket timeout.
    previous = socket.getdefaulttimeout()
    socket.setdefaulttimeout(seconds)
    try:
        yield
    finally:
        socket.setdefaulttimeout(previous)


def _copies(arrays):
    (x_train, y_train), (x_test, y_test) = arrays
    return (x_train.copy(), y_train.copy()), (x_test.copy(), y_test.copy())


# ---------------------------------------------------------------------------------------------
# The bundled sample

def _sample(name="mnist"):
    """The bundled sample's arrays, read afresh: the caller's own."""
    with importlib.resources.as_file(_sample_resource(name)) as path, np.load(path) as npz:
        return (npz["x_train"], npz["y_train"]), (npz["x_test"], npz["y_test"])


def _sample_resource(name="mnist"):
    try:
        return importlib.resources.files(__package__).joinpath(_SAMPLE_RESOURCES[name])
    except (TypeError, NotADirectoryError):
        # An editable install made before ipu_emulator/__init__.py existed imports the package
        # as a namespace package, which importlib.resources (Python 3.11) cannot read from.
        return pathlib.Path(__file__).parent.joinpath(_SAMPLE_RESOURCES[name])


def _substitute_sample(name, sample, forced):
    """``sample()``'s arrays (the caller's own), with the sample's warning once."""
    arrays = sample()
    _warn_once(name, _sample_warning_text(name, forced, n_train=len(arrays[0][0])))
    return arrays


_CIFAR_TITLES = {"cifar10": "CIFAR-10", "cifar100": "CIFAR-100"}


def _sample_warning_text(name, forced, n_train):
    if name in _CIFAR_TITLES:
        title = _CIFAR_TITLES[name]
        sample = (f"{n_train:,} generated {title}-shaped stand-in images (coloured stripes "
                  f"and noise, not photographs)")
        if forced:
            return (f"ipu_emulator: {MODE_ENV_VAR}=sample and no {title} is bundled, so "
                    f"{sample} stand in for it.")
        return (f"ipu_emulator: {title} not available offline; using {sample} "
                f"(set {MODE_ENV_VAR}=full to require the real data set).")
    title, items = {"mnist": ("MNIST", "digits"),
                    "fashion_mnist": ("Fashion-MNIST", "images")}[name]
    sample = f"the bundled sample of {n_train:,} real {title} training {items}"
    if forced:
        return f"ipu_emulator: {MODE_ENV_VAR}=sample; using {sample} instead of the full {title}."
    return (f"ipu_emulator: {title} not available offline; using {sample} "
            f"(set {MODE_ENV_VAR}=full to require the real data set).")


def _warn_once(name, text):
    if name in _warned:
        return
    _warned.add(name)
    # The default format adds "file:line: Category:" and the source line; the message is
    # meant to read as one self-explanatory line, so format just this warning as the text.
    default_format = warnings.formatwarning
    warnings.formatwarning = lambda message, *args, **kwargs: f"{message}\n"
    try:
        warnings.warn(text, SampleDataWarning)
    finally:
        warnings.formatwarning = default_format


def _reset_warnings_shown():
    """Private, for tests: forget which sample warnings were shown, so they show again."""
    _warned.clear()
    # Python's own per-location "already shown" registry would otherwise suppress a repeat.
    globals().pop("__warningregistry__", None)


def _clear_caches():
    """Private, for tests: forget loaded arrays and failed downloads."""
    _cifar_samples.clear()
    _real_arrays.clear()
    _failed_downloads.clear()


def _cifar_sample(name, label_mode="fine"):
    """A deterministic CIFAR-shaped stand-in: images (N,32,32,3) uint8, labels (N,1) uint8.

    Each class has its own colour and stripe direction/frequency, under noise, so a small
    conv net can learn to tell the classes apart (the loss falls, accuracy beats chance).
    CIFAR-100's coarse label of a generated fine class c is c // 5 (20 superclasses).
    """
    key = (name, label_mode)
    if key not in _cifar_samples:
        num_classes = 10 if name == "cifar10" else 100
        rng = np.random.default_rng(_CIFAR_SAMPLE_SEED + num_classes)
        colours = rng.uniform(40, 215, size=(num_classes, 3))
        angles = rng.uniform(0, np.pi, size=num_classes)
        frequencies = rng.uniform(0.2, 0.8, size=num_classes)
        rows, cols = np.mgrid[0:32, 0:32]
        # One (32, 32, 3) picture per class; each image is its class's plus noise.
        stripes = 40 * np.sin(frequencies[:, None, None] * (
            np.cos(angles)[:, None, None] * rows + np.sin(angles)[:, None, None] * cols))
        pictures = (colours[:, None, None, :] + stripes[..., None]).astype(np.float32)
        splits = []
        for size in CIFAR_SAMPLE_SIZES:
            fine = np.arange(size) % num_classes
            rng.shuffle(fine)
            noise = rng.standard_normal(size=(size, 32, 32, 3), dtype=np.float32)
            images = pictures[fine] + 25 * noise
            labels = fine // 5 if label_mode == "coarse" else fine
            splits.append((np.clip(images, 0, 255).astype(np.uint8),
                           labels.astype(np.uint8).reshape(-1, 1)))
        _cifar_samples[key] = tuple(splits)
    return _cifar_samples[key]


# ---------------------------------------------------------------------------------------------
# The real data: Keras cache files, or Keras's own downloader

def _find_keras_cache(relative_paths, cache_dir):
    """Paths of the cached files if all are present under <base>/datasets, else None."""
    bases = [os.path.expanduser(cache_dir)] if cache_dir else [os.path.expanduser("~/.keras")]
    bases.append(_KERAS_FALLBACK_BASE)
    for base in bases:
        paths = [os.path.join(base, "datasets", p) for p in relative_paths]
        if all(os.path.isfile(p) for p in paths):
            return paths
    return None


def _read_mnist_npz(path):
    with np.load(path, allow_pickle=False) as npz:
        return (npz["x_train"], npz["y_train"]), (npz["x_test"], npz["y_test"])


def _read_fashion_mnist_gz(paths):
    arrays = {key: _read_idx(path) for key, path in zip(_FASHION_MNIST_FILES, paths)}
    for split in ("train", "test"):
        images, labels = arrays[f"x_{split}"], arrays[f"y_{split}"]
        if images.shape[1:] != (28, 28) or labels.shape != (len(images),):
            raise ValueError(f"Fashion-MNIST {split}: images {images.shape}, labels {labels.shape}")
    return (arrays["x_train"], arrays["y_train"]), (arrays["x_test"], arrays["y_test"])


def _read_cifar_batches(train_paths, test_paths, label_key):
    """Keras's CIFAR arrays from the extracted python-pickle batches of its cache: images
    (N,32,32,3) uint8 (channels last, Keras's default format), labels (N,1) uint8."""
    def read(paths):
        images, labels = [], []
        for path in paths:
            with open(path, "rb") as f:
                batch = pickle.load(f, encoding="bytes")
            batch = {k.decode("utf8") if isinstance(k, bytes) else k: v
                     for k, v in batch.items()}
            images.append(np.asarray(batch["data"], np.uint8).reshape(-1, 3, 32, 32))
            labels.append(np.asarray(batch[label_key], np.uint8))
        return (np.concatenate(images).transpose(0, 2, 3, 1),
                np.concatenate(labels).reshape(-1, 1))
    return read(train_paths), read(test_paths)


def _read_idx(path):
    """Reads an IDX file (the MNIST/Fashion-MNIST format), gzipped if the name ends in .gz.

    Layout: two zero bytes, a type code, the number of dimensions, one big-endian uint32 per
    dimension, then the values in row-major order, big-endian.
    """
    opener = gzip.open if os.fspath(path).endswith(".gz") else open
    with opener(path, "rb") as f:
        return _read_idx_bytes(f.read(), gzipped=False, path=path)


def _read_idx_bytes(raw, gzipped, path):
    """The array in an IDX file's bytes (`gzipped`: compressed first); `path` names it in errors."""
    if gzipped:
        raw = gzip.decompress(raw)
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] not in _IDX_DTYPES:
        raise ValueError(f"{path}: not an IDX file (header {raw[:4].hex()})")
    ndim = raw[3]
    data_offset = 4 + 4 * ndim
    shape = tuple(int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim))
    dtype = np.dtype(_IDX_DTYPES[raw[2]])
    expected_size = data_offset + int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if len(raw) != expected_size:
        raise ValueError(f"{path}: {len(raw)} bytes, but header {shape} says {expected_size}")
    values = np.frombuffer(raw, dtype=dtype, offset=data_offset).reshape(shape)
    return values.astype(dtype.newbyteorder("="))  # native byte order, writable


def _original_keras_loader(name):
    """tf_keras's own load_data for `name`, even after patch_keras_datasets() replaced it."""
    if name not in _original_keras_loaders:
        loader = importlib.import_module(f"tf_keras.src.datasets.{name}").load_data
        if getattr(loader, "_ipu_emulator_loader", False):
            raise RuntimeError(f"tf_keras {name}.load_data was patched before it was recorded")
        _original_keras_loaders[name] = loader
    return _original_keras_loaders[name]


# ---------------------------------------------------------------------------------------------
# Routing tf.keras through these loaders

# The public homes of the loaders; tf.keras / tf.compat.v1.keras resolve to the api modules.
_KERAS_PUBLIC_MODULES = (
    "tf_keras.datasets.{name}",
    "tf_keras.api._v1.keras.datasets.{name}",
    "tf_keras.api._v2.keras.datasets.{name}",
)


def patch_keras_datasets():
    """Make tf.keras.datasets.{mnist,fashion_mnist,cifar10,cifar100}.load_data use these
    loaders (idempotent).

    Covers tf.keras and tf.compat.v1.keras under legacy Keras (tf_keras), however they are
    imported. Each public module re-exports tf_keras.src.datasets.<name>.load_data, and
    `import tensorflow.keras.datasets.mnist` even creates a fresh copy of the module that
    re-imports it; so the function is replaced in its source module (for modules imported
    later) and wherever it has already been re-exported.
    """
    importlib.import_module("tf_keras")  # not installed: let the ImportError say so
    for name, replacement in (("mnist", mnist.load_data),
                              ("fashion_mnist", fashion_mnist.load_data),
                              ("cifar10", cifar10.load_data),
                              ("cifar100", cifar100.load_data)):
        original = _original_keras_loader(name)
        for template in _KERAS_PUBLIC_MODULES:
            with contextlib.suppress(ImportError):  # the api layout varies between versions
                importlib.import_module(template.format(name=name))
        for module in list(sys.modules.values()):
            # __dict__, not getattr: TensorFlow's lazy-loading modules would import on access.
            namespace = getattr(module, "__dict__", None)
            if isinstance(namespace, dict) and namespace.get("load_data") is original:
                module.load_data = replacement
