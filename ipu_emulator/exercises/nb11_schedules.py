"""Notebook 11's exercises: the bubble formula, used to plan a pipeline, checked against the
simulator (unit-cost stages, a backward as long as a forward).

* 1F1B on 8 stages: the fewest micro-batches for a bubble under 5 %; the formula
  ``(S-1)/(M+S-1)`` predicts it, the simulated bubble decides.
* Interleaved 1F1B on 4 IPUs with 8 micro-batches: how many chunks (virtual stages) per IPU
  bring the bubble under 10 %; the formula is ``(P-1)/(v*M + P-1)``.

    >>> check_micro_batches_for_small_bubble(_fewest_micro_batches()).ok
    True
    >>> check_chunks_per_ipu(2).ok
    False
"""
from __future__ import annotations

from ipu_emulator.exercises import exercise, is_whole_number, not_yet, right, smallest_whole_number
from ipu_emulator.sim.pipeline_simulator import simulate_pipeline, unit_stages
from ipu_emulator.sim.schedule_rules import PipelineConfigurationError

STAGES = 8
BUBBLE_GOAL = 0.05
IPUS = 4
MICRO_BATCHES = 8
CHUNK_GOAL = 0.10
MAX_CHUNKS = 16      # beyond this the answer is far off; no need to simulate it
# A bubble exactly on the goal is not under it: the simulator's float sums may land a hair
# either side of a fraction such as 7/140.
EPSILON = 1e-9


def one_f_one_b_bubble(micro_batches: int) -> float:
    """The simulated bubble of 1F1B with ``STAGES`` unit stages."""
    return simulate_pipeline(unit_stages(STAGES), "1f1b", micro_batches,
                             unit_cost=True).metrics.bubble_fraction


def _under(bubble: float, goal: float) -> bool:
    return bubble < goal - EPSILON


def _fewest_micro_batches() -> int:
    return smallest_whole_number(lambda m: _under(one_f_one_b_bubble(m), BUBBLE_GOAL))



@exercise("11.micro-batches-for-5-percent", solution=_fewest_micro_batches,
          wrong=(133, 100, 140, 8, 0, "134"))
def check_micro_batches_for_small_bubble(micro_batches):
    """The fewest micro-batches that bring 1F1B's bubble on 8 stages under 5 %."""
    if not is_whole_number(micro_batches):
        return not_yet("answer with a whole number of micro-batches, without quotes.")
    if micro_batches < 1:
        return not_yet("a pipeline needs at least one micro-batch.")
    bubble = one_f_one_b_bubble(micro_batches)
    if not _under(bubble, BUBBLE_GOAL):
        exactly = " exactly on the goal, not under it" if abs(bubble - BUBBLE_GOAL) < 1e-6 \
            else ""
        return not_yet(f"with {micro_batches} micro-batches the simulated bubble is "
                       f"{bubble:.2%}{exactly}. Solve (S-1)/(M+S-1) < 0.05 for M with S = 8.")
    if _under(one_f_one_b_bubble(micro_batches - 1), BUBBLE_GOAL):
        return not_yet(f"{micro_batches} micro-batches get under 5 % ({bubble:.2%}), but "
                       "fewer would too. Which is the smallest count?")
    return right(f"{micro_batches} micro-batches: the simulated bubble is {bubble:.2%} = "
                 f"7/{micro_batches + 7}, as the formula says. Eight stages need many "
                 "micro-batches per weight update to hide their fill and drain, which is why "
                 "deep pipelines use large gradient accumulation counts.")


def interleaved_bubble(chunks_per_ipu: int) -> float:
    """The simulated bubble of interleaved 1F1B: ``IPUS`` IPUs, each holding
    ``chunks_per_ipu`` unit chunks of the model, ``MICRO_BATCHES`` micro-batches."""
    return simulate_pipeline(unit_stages(IPUS * chunks_per_ipu), "interleaved-1f1b",
                             MICRO_BATCHES, unit_cost=True,
                             stages_per_ipu=chunks_per_ipu).metrics.bubble_fraction


def _fewest_chunks() -> int:
    return smallest_whole_number(lambda v: _under(interleaved_bubble(v), CHUNK_GOAL),
                                 limit=MAX_CHUNKS)


@exercise("11.chunks-per-ipu", solution=_fewest_chunks, wrong=(1, 2, 3, 8, 0, "4"))
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
    if not _under(bubble, CHUNK_GOAL):
        chunks = f"{chunks_per_ipu} chunk{'s' if chunks_per_ipu > 1 else ''}"
        # No figure here may give the answer away, so the set-up is named, not numbered.
        return not_yet(f"with {chunks} per IPU the simulated bubble is {bubble:.1%}. Each "
                       "extra chunk shrinks the fill and drain: solve (P-1)/(v*M + P-1) < 0.1 "
                       "for v, with P the IPUs and M the micro-batches of this exercise.")
    if chunks_per_ipu > 1 and _under(interleaved_bubble(chunks_per_ipu - 1), CHUNK_GOAL):
        return not_yet(f"{chunks_per_ipu} chunks get the bubble under 10 %, but fewer would "
                       "too. Which is the smallest number?")
    return right(f"{chunks_per_ipu} chunks per IPU: bubble {bubble:.1%}. The price is not in "
                 "the bubble: every chunk boundary is one more hop between IPUs per "
                 "micro-batch, and the first IPU holds more activations at once.")


__all__ = ["check_micro_batches_for_small_bubble", "check_chunks_per_ipu",
           "one_f_one_b_bubble", "interleaved_bubble"]
