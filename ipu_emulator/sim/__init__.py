"""The pure simulator: what an IPU would have done, in plain Python (no TensorFlow).

``hardware``            IPU targets (tiles, memory, FLOP/s, link and host bandwidths) and the host model
``model_layers``        the layers a model is made of, each with its shapes, parameters, FLOPs, bytes
``cost_model``          a model's layers and pipeline stages: FLOPs, activations, weights per micro-batch
``builtin_models``      the tutorials' models (the pipelining MLP, the convnet)
``schedule_actions``    the actions of a pipeline schedule, the ``Schedule`` record, its checks, deadlocks
``schedule_rules``      Graphcore's configuration rules for pipelines and the SDK's messages
``schedules``           the schedule builders (Grouped, Interleaved, Sequential, 1F1B, ...)
``timeline``            events per lane, the metrics derived from them, the BSP model of engine runs
``pipeline_simulator``  a schedule plus stage costs plus hardware -> a timeline and its metrics
``recorded_runs``       recorded engine runs (``ipu_emulator.record``) -> their simulated timeline
``feeds``               a training with and without feeds, as engine runs (tutorial 3's what-if)

May import: the standard library and ``ipu_emulator.record``; never TensorFlow, NumPy or the
emulator's other layers (``make test`` checks this with import-linter).
"""
