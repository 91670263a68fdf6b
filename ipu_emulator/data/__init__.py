"""Data that works offline: ``datasets`` (MNIST, Fashion-MNIST, CIFAR-10/100 with Keras's
shapes) and the bundled samples it falls back to (``mnist_sample.npz``,
``fashion_mnist_sample.npz``; see README.md)."""
