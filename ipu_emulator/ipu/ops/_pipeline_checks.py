"""The checks ``pipelining_ops.pipeline`` makes of its arguments, with the SDK's messages.

IPU Keras makes the same checks of a pipelined model's options (``keras/pipelining.py``):
the SDK's Keras hands them to ``pipeline``, which the emulator's Keras does not build.
"""


def check_member(value, enumeration, what):
    """``value`` (the argument ``what``) must be a member of ``enumeration``."""
    if not isinstance(value, enumeration):
        raise TypeError("The given %s is not a member of the %s enumeration."
                        % (what, enumeration.__name__))


def check_device_mapping(num_stages, device_mapping):
    """At least two stages, and one ``device_mapping`` entry for each."""
    if num_stages < 2:
        raise ValueError("Pipeline requires at least two computational stages.")
    if not isinstance(device_mapping, (list, tuple)):
        raise TypeError("device_mapping argument needs to be a list or a tuple.")
    if len(device_mapping) != num_stages:
        raise ValueError("Each stage must be mapped to an IPU: %d mappings != %d stages"
                         % (len(device_mapping), num_stages))


def check_stage_options(options, what, num_stages, option_type):
    """None, or one ``option_type`` (``PipelineStageOptions``) per stage."""
    if options is None:
        return
    if not isinstance(options, (list, tuple)) or not all(
            isinstance(o, option_type) for o in options):
        raise TypeError("%s must be a list or a tuple of PipelineStageOptions objects." % what)
    if len(options) != num_stages:
        raise ValueError(
            "%s must be a list or a tuple of PipelineStageOptions objects of length %d (same "
            "number as the number of computational stages) but is %d."
            % (what, num_stages, len(options)))


__all__ = ["check_member", "check_device_mapping", "check_stage_options"]
