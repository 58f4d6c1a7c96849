"""The joint problem (Piper's): pipeline stages, data and tensor parallelism and recomputation in one exact plan.

Data model in :mod:`milp_partition.joint.problem`, solve steps in :mod:`milp_partition.joint.solve`,
the verifier in :mod:`milp_partition.verifiers.joint`.
"""
