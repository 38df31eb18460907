"""What pyproject.toml cannot say: the top-level hwconfigs/ folder ships inside the package as
accelsim.hwconfigs (a table in pyproject.toml can list packages or discover them, not both)."""
from setuptools import find_packages, setup

setup(packages=[*find_packages(include=["accelsim", "accelsim.*"]), "accelsim.hwconfigs"],
      package_dir={"accelsim.hwconfigs": "hwconfigs"})
