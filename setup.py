"""Build of the one compiled part: the joint DP's feasibility pass (milp_partition/joint/_jointdp.c).

Everything else is in pyproject.toml.  The extension is optional: without a C compiler the install
still succeeds and the joint DP runs its numpy pass (slower, the same answers).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "milp_partition.joint._jointdp",
            sources=["milp_partition/joint/_jointdp.c"],
            extra_compile_args=["-O3", "-std=gnu11"],
            optional=True,
        )
    ]
)
