"""IPU hardware targets and the host model: the numbers the simulator's cost model runs on.

Every published number carries a comment naming its source (Graphcore's datasheets and
documentation, Jia et al. 2019 "Dissecting the Graphcore IPU Architecture via
Microbenchmarking", analysts' write-ups of each chip).  Numbers no public source gives (sync
latency, link latency, the fraction of peak FLOP/s small layers reach, stream-copy latency)
are *named parameters* with a justified default, so a notebook or widget can change them and
see what they do::

    >>> from ipu_emulator.sim.hardware import get_target, HostModel
    >>> gc200 = get_target("ipu2")
    >>> gc200.tiles, round(gc200.sram_bytes_per_chip / 2**20)
    (1472, 897)
    >>> slower_sync = gc200.with_overrides(external_sync_cycles=5000)
    >>> round(HostModel().engine_run_overhead_s * 1e3, 2)   # ms of host time per Engine::run
    1.02

Pure Python: no TensorFlow import (the simulator layer never imports it).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Dict, Optional, Tuple

KIB = 1024
GB = 10**9  # vendors quote bandwidths and memory sizes in decimal units
TERA = 10**12


@dataclass(frozen=True)
class IPUTarget:
    """One IPU chip as the timing model sees it.  All rates are per chip, per second.

    Tunable unknowns (not in any source we found; see the field comments):
    ``compute_efficiency``, ``external_sync_cycles``, ``ipu_link_latency_s``,
    ``inter_ipu_copy_bandwidth_bytes_per_s``, ``streaming_memory_bandwidth_bytes_per_s``,
    ``fifo_bandwidth_bytes_per_s``.  Those and the fixed cost of each op (``OP_CYCLES``) are
    calibrated on Graphcore's execution traces where a trace fixes them (docs/fidelity.md).

    Example::

        >>> t = get_target("ipu21")
        >>> t.peak_fp32_flops / 1e12
        87.5
    """

    name: str
    product: str
    tiles: int
    threads_per_tile: int
    sram_bytes_per_tile: int
    clock_hz: float
    peak_fp32_flops: float
    peak_fp16_flops: float
    sram_bandwidth_bytes_per_s: float  # aggregate over all tiles' local memories
    exchange_bandwidth_bytes_per_s: float  # on-chip all-to-all tile exchange
    ipu_link_bandwidth_bytes_per_s: float  # chip-to-chip, all IPU-Links of one chip together
    host_link_bandwidth_bytes_per_s: float  # host <-> IPU, per direction
    streaming_memory_bytes_per_ipu: int  # off-chip DRAM attached to the IPU system, per IPU
    # --- tunable unknowns -------------------------------------------------------------
    # Fraction of peak FP32 FLOP/s reached by the tutorials' small layers (batch 16-64, a few
    # hundred units): they cannot fill 1472 tiles x 6 threads nor keep the matrix units
    # streaming.  No source measures it.  Calibrated on the pipelining tutorial's step-3
    # trace: IPU1 (small layers and the loss) is busy about 0.6 of a main-phase step while
    # IPU0 (dense256, 80 % of the FLOPs) sets the pace, which needs the FLOPs to weigh about
    # this much against the ops' fixed costs.
    compute_efficiency: float = 0.08
    # Cycles of one external (chip-wide / host-visible) BSP sync.  Poplar's IPUModel has a
    # ``globalSyncCycles`` knob but our sources give no value.  A sync that crosses the chip
    # boundary must travel the sync network and back; we assume about a microsecond.
    external_sync_cycles: int = 1500
    # Fixed latency of one IPU-Link transfer (link serialisation + packet setup).  Unknown;
    # SerDes links of this class sit well below a microsecond, GlobalExchange setup adds
    # some, so we assume 1 us.
    ipu_link_latency_s: float = 1e-6
    # What one copy between two IPUs achieves.  The datasheets give all IPU-Links of a chip
    # together (GC200: 10 links, 320 GB/s; one link 32 GB/s); a copy between two IPUs uses
    # the links joining them.  Calibrated on the pipelining tutorial's step-2 trace (sharded:
    # a mini-batch about 1.72 times step 1's, the difference mostly copies), which gives about
    # three quarters of one link.
    inter_ipu_copy_bandwidth_bytes_per_s: float = 24 * GB
    # Bandwidth between one IPU and its streaming memory (offloaded optimizer state and
    # activations).  No source gives it; the traffic leaves the chip over the same host/gateway
    # link as stream copies, so None means "the host link bandwidth".
    streaming_memory_bandwidth_bytes_per_s: Optional[float] = None
    # How fast a pipeline stage's FIFO op moves a micro-batch's activations: after each
    # forward pass it pops the oldest micro-batch's activations and pushes the new one's
    # (on-chip copies through the exchange).  No source gives it; calibrated on the trace of
    # Graphcore's pipelining tutorial, step 3 (bench/fidelity.py; docs/fidelity.md).
    fifo_bandwidth_bytes_per_s: float = 80 * GB

    @property
    def streaming_memory_bandwidth(self) -> float:
        """Bytes/s to and from streaming memory (the host link's unless set)."""
        if self.streaming_memory_bandwidth_bytes_per_s is not None:
            return self.streaming_memory_bandwidth_bytes_per_s
        return self.host_link_bandwidth_bytes_per_s

    @property
    def sram_bytes_per_chip(self) -> int:
        return self.tiles * self.sram_bytes_per_tile

    @property
    def worker_threads(self) -> int:
        return self.tiles * self.threads_per_tile

    @property
    def external_sync_seconds(self) -> float:
        return self.external_sync_cycles / self.clock_hz

    @property
    def achievable_fp32_flops(self) -> float:
        return self.peak_fp32_flops * self.compute_efficiency

    @property
    def achievable_fp16_flops(self) -> float:
        """The rate of float16 matrix products (matmuls, convolutions) on the tiles'
        accumulating matrix units: the peak float16 rate, at the same efficiency as float32
        (no source measures float16's for small layers)."""
        return self.peak_fp16_flops * self.compute_efficiency

    def with_overrides(self, **changes) -> "IPUTarget":
        """A copy with some fields changed, e.g. ``with_overrides(compute_efficiency=0.5)``."""
        return replace(self, **changes)


# --- the fixed cost of an op, by what it is (calibrated) -------------------------------------
# Small layers on an IPU are bound by fixed costs, not arithmetic: Poplar runs every op as one
# or more compute sets separated by syncs and exchanges, so an op costs hundreds to thousands
# of cycles however few FLOPs it does; its FLOPs and bytes are timed on top (``timeline.
# compute_seconds``).  No source lists these costs.  They are fitted to the execution traces
# of Graphcore's pipelining tutorial (its MLP, batch 32, Mk2 IPUs, 1.33 GHz).  Step 1 (one
# IPU): the forward pass, flatten to softmax cross-entropy, about 23,000 cycles (5 matmuls, 9
# element-wise ops, 1 reduction, 1 loss); the backward pass with gradient accumulation about
# 27,000 (9 matmuls, 6 element-wise, 5 reductions, 10 accumulator adds); the weight update
# about 6,200 (10 optimizer kernels).  Step 3's ramp-up (split at dense32) shares the forward
# out: IPU0's dense256, dense128 and dense64 with their FIFO op about 17,000 cycles, IPU1's
# dense32, logits and loss about 11,000-13,000.  Besides the FLOPs (nearly all on IPU0), what
# IPU0 adds over its three matmuls is six element-wise ops (bias adds, relus), so that trace
# fixes their cost, and the loss is what step 1's forward pass leaves.  With
# ``compute_efficiency`` (fixed by step 3's IPU1 busy share) timing the FLOPs, the model
# gives about 23,000, 27,600 and 6,230 cycles for step 1's phases and 16,400 / 12,300 for
# step 3's forward (bench/fidelity.py prints the phases and the forward's ratio, 1.34).  The
# figures cannot all hold exactly with costs that make sense, so each is met within 5 %
# (docs/fidelity.md); matmul against reduction stays a judgement: the traces give phase
# totals, not single ops.
OP_CYCLES: Dict[str, int] = {
    "matmul": 1050,       # MatMul, convolutions and their gradients: partial sums, then a reduce
    "elementwise": 650,   # bias add, activations and their gradients, scaling: one compute set
    "reduction": 650,     # mean, sum, bias gradient, pooling: a compute set and a cross-tile reduce
    "loss": 7100,         # the fused softmax cross-entropy: max, exp, sum, log and the gradient
    "variable": 610,      # one op on one variable: an optimizer kernel, an accumulator's add
}


def fifo_seconds(nbytes: float, target: "IPUTarget") -> float:
    """One push into (or pop from) a pipeline stage's activation FIFOs of ``nbytes``: the
    FIFO op after each forward pass does one of each."""
    return nbytes / target.fifo_bandwidth_bytes_per_s


def op_cycles(counts: Dict[str, int]) -> float:
    """Fixed cycles of a phase from its ops counted by kind (``OP_CYCLES``).

    >>> op_cycles({"matmul": 5, "elementwise": 9, "reduction": 1, "loss": 1})
    18850
    """
    return sum(OP_CYCLES[kind] * count for kind, count in counts.items())


# Mk1 "Colossus" GC2 (C2 PCIe card = 2 IPUs).
IPU1 = IPUTarget(
    name="ipu1",
    product="Mk1 GC2 (Colossus)",
    tiles=1216,  # Jia et al. 2019 "Dissecting the Graphcore IPU"; TF tests tiles_per_ipu = 1216
    threads_per_tile=6,  # Jia et al. 2019 (7296 threads per chip)
    sram_bytes_per_tile=256 * KIB,  # Jia et al. 2019 (256 KiB per tile, 304 MiB per chip)
    clock_hz=1.6e9,  # Jia et al. 2019
    peak_fp32_flops=31.1 * TERA,  # Jia et al. 2019
    peak_fp16_flops=124.5 * TERA,  # Jia et al. 2019 (= 1216 tiles x 64 FLOP/cycle x 1.6 GHz)
    sram_bandwidth_bytes_per_s=45 * TERA,  # Jia et al. 2019: 45 TB/s aggregate
    exchange_bandwidth_bytes_per_s=8 * TERA,  # silvertonconsulting.com: 8 TB/s all-to-all
    ipu_link_bandwidth_bytes_per_s=2.5e12 / 8,  # silvertonconsulting.com: 80 links, 2.5 Tbps
    host_link_bandwidth_bytes_per_s=31.5 * GB,  # silvertonconsulting.com: PCIe Gen4 x16
    streaming_memory_bytes_per_ipu=0,  # Mk1 has no streaming memory (host memory only)
)

# Mk2 GC200 (IPU-M2000 = 4 IPUs).
IPU2 = IPUTarget(
    name="ipu2",
    product="Mk2 GC200",
    tiles=1472,  # thecharlieblake.co.uk/ipus; TF tests tiles_per_ipu = 1472
    threads_per_tile=6,  # thecharlieblake.co.uk/ipus (8832 threads per chip)
    sram_bytes_per_tile=624 * KIB,  # thecharlieblake.co.uk/ipus (~600 KB/tile, ~900 MB/chip)
    # talent-republic.tv gives 1.33-1.35 GHz; 1.33 GHz matches 250 TFLOPS FP16 =
    # 1472 tiles x 128 FLOP/cycle x 1.33 GHz.
    clock_hz=1.33e9,
    peak_fp32_flops=62.5 * TERA,  # cambrian-ai.com
    peak_fp16_flops=250 * TERA,  # thecharlieblake.co.uk/ipus
    sram_bandwidth_bytes_per_s=47.5 * TERA,  # thecharlieblake.co.uk/ipus: 47.5 TB/s
    exchange_bandwidth_bytes_per_s=8 * TERA,  # thecharlieblake.co.uk/ipus: 8 TB/s all-to-all
    ipu_link_bandwidth_bytes_per_s=320 * GB,  # thecharlieblake.co.uk/ipus: 10 links, 320 GB/s
    # thecharlieblake.co.uk/ipus: PCIe Gen4 x16, 64 GB/s bidirectional -> 32 GB/s each way.
    # (In an IPU-M2000 the host connects over RoCE via the IPU-Gateway instead.)
    host_link_bandwidth_bytes_per_s=32 * GB,
    streaming_memory_bytes_per_ipu=448 * GB // 4,  # cambrian-ai.com: 448 GB per M2000 (4 IPUs)
)

# Bow IPU (Bow-2000 = 4 IPUs): the GC200 die with wafer-on-wafer power delivery, clocked higher.
IPU21 = IPUTarget(
    name="ipu21",
    product="Bow IPU",
    tiles=1472,  # docs.graphcore.ai bow-2000-datasheet: 5888 cores per 4 IPUs
    threads_per_tile=6,  # same tile as GC200 (the Bow IPU is the Mk2 IPU, wafer-on-wafer)
    sram_bytes_per_tile=624 * KIB,  # datasheet: 3.6 GB in-processor memory per 4 IPUs (= GC200)
    clock_hz=1.85e9,  # talent-republic.tv: Bow 1.85 GHz
    # Not listed in our sources: GC200's 62.5 TFLOPS scaled by the FP16 ratio 350/250 (equal
    # to the clock ratio 1.85/1.33 within 0.5 %, as expected for the same die).
    peak_fp32_flops=87.5 * TERA,
    peak_fp16_flops=350 * TERA,  # bow-2000-datasheet: 1.4 PFLOPS per 4 IPUs
    # Not listed; same memories as GC200 at the higher clock: 47.5 TB/s x 1.85/1.33.
    sram_bandwidth_bytes_per_s=47.5 * TERA * 1.85 / 1.33,
    # Not listed; GC200's 8 TB/s x 1.85/1.33 (the exchange is clocked with the tiles).
    exchange_bandwidth_bytes_per_s=8 * TERA * 1.85 / 1.33,
    # bow-2000-datasheet's "IPU-Link 512 Gbps" is a per-link figure; the Bow die keeps GC200's
    # 10 IPU-Links, so we keep GC200's 320 GB/s aggregate.
    ipu_link_bandwidth_bytes_per_s=320 * GB,
    host_link_bandwidth_bytes_per_s=32 * GB,  # PCIe Gen4 / RoCEv2, as GC200
    streaming_memory_bytes_per_ipu=256 * GB // 4,  # bow-2000-datasheet: 256 GB per Bow-2000
)

TARGETS: Dict[str, IPUTarget] = {t.name: t for t in (IPU1, IPU2, IPU21)}
IPU_VERSIONS = tuple(TARGETS)  # ("ipu1", "ipu2", "ipu21"): what --ipu-version and the widgets offer


def next_power_of_two(count: int) -> int:
    """The smallest multi-IPU device that holds ``count`` IPUs: devices come in sizes 1, 2,
    4, 8, ... (``gc-info -l``; Graphcore's TensorFlow user guide), so shards and stages
    round up to one of them.

    >>> [next_power_of_two(n) for n in (1, 2, 3, 5)]
    [1, 2, 4, 8]
    """
    if not isinstance(count, int) or isinstance(count, bool) or count < 1:
        raise ValueError(f"count must be a positive integer, got {count!r}")
    return 1 << (count - 1).bit_length()


def get_target(name) -> IPUTarget:
    """The target called ``name`` ("ipu1", "ipu2" or "ipu21"); an ``IPUTarget`` passes through.

    >>> get_target("ipu1").product
    'Mk1 GC2 (Colossus)'
    """
    if isinstance(name, IPUTarget):
        return name
    try:
        return TARGETS[name]
    except (KeyError, TypeError):
        valid = ", ".join(repr(n) for n in TARGETS)
        raise ValueError(f"Unknown IPU target {name!r}; valid names are {valid}.") from None


# --- host model ---------------------------------------------------------------------------

# Graphcore tutorial 3 (TF2 infeed/outfeed): 10,000 training steps, host wall time measured on
# an IPU system.  With feeds: 10 steps per Engine::run (1,000 runs) took 14.6 s; without
# feeds: one Engine::run per step (10,000 runs) took 23.8 s.
TUTORIAL3_STEPS = 10_000
TUTORIAL3_LOOPED = (1_000, 14.6)  # (engine runs, seconds)
TUTORIAL3_PER_STEP = (10_000, 23.8)


def calibrate_host_costs(
    steps: int, looped: Tuple[int, float], per_step: Tuple[int, float]
) -> Tuple[float, float]:
    """Solve ``seconds = runs * h + steps * d`` for two measurements of the same step count.

    Returns ``(h, d)``: host seconds per engine run and seconds per step.

    >>> h, d = calibrate_host_costs(10_000, (1_000, 14.6), (10_000, 23.8))
    >>> round(h * 1e3, 3), round(d * 1e3, 3)
    (1.022, 1.358)
    """
    (runs_a, seconds_a), (runs_b, seconds_b) = looped, per_step
    if runs_a == runs_b:
        raise ValueError("The two measurements need different engine-run counts.")
    h = (seconds_b - seconds_a) / (runs_b - runs_a)
    d = (seconds_a - runs_a * h) / steps
    return h, d


_TUTORIAL3_H, _TUTORIAL3_D = calibrate_host_costs(
    TUTORIAL3_STEPS, TUTORIAL3_LOOPED, TUTORIAL3_PER_STEP
)


@dataclass(frozen=True)
class HostModel:
    """What the host costs around the IPU: launching engine runs and feeding stream copies.

    ``engine_run_overhead_s`` (h) is the host time of one ``sess.run`` / ``Engine::run``:
    Poplar's run setup, argument and stream set-up, and the sync with the host.  It is
    calibrated from Graphcore's tutorial 3: 10,000 steps took 14.6 s at 10 steps per engine run
    (1,000 runs) and 23.8 s at one engine run per step (10,000 runs).  Solving
    ``runs * h + steps * d = seconds`` for both gives

        h = (23.8 - 14.6) / (10,000 - 1,000)   = 1.022 ms per engine run
        d = (14.6 - 1,000 h) / 10,000          = 1.358 ms per step

    ``d`` is everything else a step cost on that machine: mostly the host producing each
    batch (tf.data pipeline, Python), since an MNIST step is microseconds of IPU compute.
    It depends on the user's input pipeline, not on the IPU, so it is *not* charged by
    default (``host_seconds_per_batch = 0``: an ideal host that keeps up);
    ``HostModel.tutorial3()`` charges it and reproduces the tutorial's 23.8 / 14.6 = 1.63.

    ``stream_copy_latency_s`` is the fixed cost of one host <-> IPU stream copy
    (StreamCopyBegin/Mid/End: DMA setup, host callback).  Unknown; PCIe DMA round trips and
    a host callback are microseconds, so 5 us.

    ``infeed_prefetch_depth`` is how many infeed elements the host may prepare ahead of the
    IPU (the SDK >= 2.6 default ``prefetch_depth`` of 3); it only matters when
    ``host_seconds_per_batch > 0``.

    >>> HostModel().host_seconds_per_batch
    0.0
    >>> round(HostModel.tutorial3().host_seconds_per_batch * 1e3, 3)
    1.358
    """

    engine_run_overhead_s: float = _TUTORIAL3_H
    stream_copy_latency_s: float = 5e-6
    host_seconds_per_batch: float = 0.0
    infeed_prefetch_depth: int = 3

    @classmethod
    def tutorial3(cls, **changes) -> "HostModel":
        """The host of Graphcore's tutorial 3 measurement, per-batch host work included."""
        return replace(cls(host_seconds_per_batch=_TUTORIAL3_D), **changes)
