"""Notebook 10's exercise: the bubble formula of interleaved 1F1B, used to plan a pipeline,
checked against the simulator (unit-cost stages, a backward as long as a forward).

Interleaved 1F1B on 4 IPUs with 8 micro-batches: how many chunks (virtual stages) per IPU
bring the bubble under 10 %; the formula is ``(P-1)/(v*M + P-1)``.

    >>> check_chunks_per_ipu(2).ok
    False
"""
from __future__ import annotations

from ipu_emulator.exercises import exercise, is_whole_number, not_yet, right, smallest_whole_number
from ipu_emulator.sim.pipeline_simulator import simulate_pipeline, unit_stages
from ipu_emulator.sim.schedule_rules import PipelineConfigurationError

IPUS = 4
MICRO_BATCHES = 8
CHUNK_GOAL = 0.10
MAX_CHUNKS = 16      # beyond this the answer is far off; no need to simulate it
# A bubble exactly on the goal is not under it: the simulator's float sums may land a hair
# either side of a fraction such as 3/30.
EPSILON = 1e-9


def _under(bubble: float, goal: float) -> bool:
    return bubble < goal - EPSILON


def interleaved_bubble(chunks_per_ipu: int) -> float:
    """The simulated bubble of interleaved 1F1B: ``IPUS`` IPUs, each holding
    ``chunks_per_ipu`` unit chunks of the model, ``MICRO_BATCHES`` micro-batches."""
    return simulate_pipeline(unit_stages(IPUS * chunks_per_ipu), "interleaved-1f1b",
                             MICRO_BATCHES, unit_cost=True,
                             stages_per_ipu=chunks_per_ipu).metrics.bubble_fraction


def _fewest_chunks() -> int:
    return smallest_whole_number(lambda v: _under(interleaved_bubble(v), CHUNK_GOAL),
                                 limit=MAX_CHUNKS)


@exercise("10.chunks-per-ipu", solution=_fewest_chunks, wrong=(1, 2, 3, 8, 0, "4"))
def check_chunks_per_ipu(chunks_per_ipu):
    """The fewest chunks per IPU that bring interleaved 1F1B's bubble under 10 % (4 IPUs,
    8 micro-batches)."""
    if not is_whole_number(chunks_per_ipu):
        return not_yet("answer with a whole number of chunks per IPU, without quotes.")
    if not 1 <= chunks_per_ipu <= MAX_CHUNKS:
        return not_yet(f"each IPU holds from 1 to {MAX_CHUNKS} chunks here; 1 chunk per IPU "
                       "is plain 1F1B.")
    try:
        bubble = interleaved_bubble(chunks_per_ipu)
    except PipelineConfigurationError as error:
        return not_yet(f"the simulator refuses that: {error.message}")
    if not _under(bubble, CHUNK_GOAL) or (
            chunks_per_ipu > 1 and _under(interleaved_bubble(chunks_per_ipu - 1), CHUNK_GOAL)):
        # The same words above and below the answer, and no bubble figure: the formula and
        # run(...) are the learner's tools, the check is no oracle to search with.
        return not_yet("each extra chunk shrinks the fill and drain: solve "
                       "(P-1)/(v*M + P-1) < 0.1 for the smallest whole v, with P the IPUs "
                       "and M the micro-batches of this exercise.")
    return right(f"{chunks_per_ipu} chunks per IPU: bubble {bubble:.1%}. The price is not in "
                 "the bubble: every chunk boundary is one more hop between IPUs per "
                 "micro-batch, and the first IPU holds more activations at once.")


__all__ = ["check_chunks_per_ipu", "interleaved_bubble"]
