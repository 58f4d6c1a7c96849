"""Build of the compiled parts: the joint DP's feasibility pass (milp_partition/joint/_jointdp.c) and the joint
polisher's group split (heuristics/_groupsplit.c).

Everything else is in pyproject.toml.  Both extensions are optional: without a C compiler the install still
succeeds, the joint DP runs its numpy pass and the polisher its Python branch and bound (slower, the same answers).
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
    ]
)
