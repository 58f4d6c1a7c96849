r"""The price of the messages between stages of an imported graph, one formula for every problem that prices them.

The pipeline problem (:mod:`milp_partition.pipeline`, its verifier :mod:`milp_partition.verifiers.pipeline`) and
the joint problem made from an imported graph (:mod:`milp_partition.joint.layers`, its verifier
:mod:`milp_partition.verifiers.joint`) price a plan's messages the same way (issue 42: a plan has one price
wherever it is priced):

* **one message per edge that crosses the cut**, each way: edge ``(u, v)`` with ``u`` and ``v`` on different
  stages sends ``u``'s activations to ``v`` in the forward pass and ``v``'s gradient back in the backward pass;
  each of the two is paid by the stage that sends it and by the stage that receives it;
* a message of ``c`` bytes takes the link's time :math:`t(c) = \alpha + c \beta` (:func:`message_time_s`; a
  calibrated link may fit several ``(alpha, beta)`` regimes by size: :math:`t` is then the link's own function),
  and a tensor of no bytes is no message (:math:`t(0) = 0`).

So a stage ``S``'s message time per micro-batch is

.. math:: C_S = \sum_{(u, v):\ u \in S,\ v \notin S} 2\, t(c_{uv}) + \sum_{(u, v):\ u \notin S,\ v \in S} 2\, t(c_{uv})

(in the pipeline problem's training graph, the forward edge carries the first message and its mirrored
backward edge the second).  ``run`` sends each output tensor of a stage once to each stage that reads it
(:mod:`milp_partition.run.mixed`), so an edge model counts a tensor twice where two layers of one stage read
it (Llama's rotary embedding, its attention mask): an upper bound of what the run sends, and the model Piper's
own instances define (:mod:`milp_partition.joint.problem`).  The pipeline problem keeps its older model (once
per source node and direction, the largest of its out-edges) on every other graph (Tarnawski's, PipeDream's
profiles, hand-written native graphs), where its known optima are defined by it.

The joint problem's stage time is Piper's ``(E_i / d + AR) / B`` with ``E_i`` the crossing edges' bytes, twice;
:func:`message_as_bytes` writes a message's time as the bytes that take that time at the joint cluster's
bandwidth ``B`` (:math:`B\, t(c)`), so that Piper's formula, every search over it and its verifier charge
:math:`t(c)` per message without a change.
"""

from __future__ import annotations

import math


def message_time_s(nbytes: float, alpha_s: float, beta_s_per_byte: float) -> float:
    """A point-to-point message of ``nbytes`` bytes: ``alpha + nbytes * beta`` seconds; 0 for no bytes (nothing is sent)."""
    if nbytes <= 0:
        return 0.0
    return alpha_s + nbytes * beta_s_per_byte


def message_as_bytes(message_s: float, bandwidth_bytes_per_s: float) -> float:
    """The bytes that take ``message_s`` seconds at ``bandwidth_bytes_per_s``: ``B t`` (the joint problem's edge bytes).

    Raises
    ------
    ValueError
        When the bandwidth is not a finite positive number (``B t`` would not price ``t``).
    """
    if not (math.isfinite(bandwidth_bytes_per_s) and bandwidth_bytes_per_s > 0):
        raise ValueError(f"the bandwidth must be a finite positive number of bytes per second, got {bandwidth_bytes_per_s!r}")
    return message_s * bandwidth_bytes_per_s


def per_sample(value: float, samples_per_microbatch: int) -> float:
    """A time per micro-batch of ``samples_per_microbatch`` samples, per sample (the import's ``batch_size``)."""
    if samples_per_microbatch < 1:
        raise ValueError(f"a micro-batch holds at least one sample, got {samples_per_microbatch}")
    return value / samples_per_microbatch
