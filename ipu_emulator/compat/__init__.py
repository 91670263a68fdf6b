"""Import-path shims for older Graphcore code (see ``ipu_emulator.cli.import_aliases``)."""
