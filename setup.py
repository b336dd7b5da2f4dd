"""Copy the top-level data folders into the wheel.

`action_space/` and `prompts/` live at the top of the repository so people can read and edit
them; a wheel carries them as `evolvemem/_data/<folder>`. `evolvemem.paths` looks in the checkout
first, then in the installed package, so both layouts work.
"""
import pathlib
import shutil

from setuptools import setup
from setuptools.command.build_py import build_py

DATA_FOLDERS = ("action_space", "prompts")


class BuildPyWithData(build_py):
    def run(self):
        super().run()
        root = pathlib.Path(__file__).resolve().parent
        for name in DATA_FOLDERS:
            target = pathlib.Path(self.build_lib) / "evolvemem" / "_data" / name
            shutil.copytree(root / name, target, dirs_exist_ok=True)


setup(cmdclass={"build_py": BuildPyWithData})
