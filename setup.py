"""Build of the compiled parts: the joint DP's feasibility pass (milp_partition/joint/_jointdp.c), the joint
polisher's group split (heuristics/_groupsplit.c) and the hetero search's two-column device step
(milp_partition/hetero/_hetero.c).

Everything else is in pyproject.toml.  The extensions are optional: without a C compiler the install still
succeeds, the joint DP runs its numpy pass, the polisher its Python branch and bound and the hetero search its
numpy step (slower, the same answers).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "milp_partition.joint._jointdp",
            sources=["milp_partition/joint/_jointdp.c"],
            extra_compile_args=["-O3", "-std=gnu11"],
            optional=True,
        ),
        Extension(
            "milp_partition.heuristics._groupsplit",
            sources=["heuristics/_groupsplit.c"],
            extra_compile_args=["-O3", "-std=gnu11"],
            optional=True,
        ),
        Extension(
            "milp_partition.hetero._hetero",
            sources=["milp_partition/hetero/_hetero.c"],
            # no fused multiply-add: the search's bounds must be the same doubles as its Python/numpy forms
            extra_compile_args=["-O3", "-std=gnu11", "-ffp-contract=off"],
            optional=True,
        ),
    ]
)
