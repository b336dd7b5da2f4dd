"""The data folders (action space, prompts) work from an installed wheel, not only a checkout."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_wheel_carries_the_action_space_and_prompts(tmp_path):
    src = tmp_path / "src"
    # build from a copy of the tracked sources so the checkout is untouched
    shutil.copytree(
        REPO,
        src,
        ignore=shutil.ignore_patterns(
            ".git", ".venv", "venv", "runs", "build", "*.egg-info", "__pycache__", ".pytest_cache"
        ),
    )
    build = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(tmp_path / "dist"),
            str(src),
        ],
        capture_output=True,
        text=True,
    )
    assert build.returncode == 0, build.stderr[-2000:]
    wheel = next((tmp_path / "dist").glob("evolvemem-*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    assert "evolvemem/_data/action_space/1_views.toml" in names
    assert "evolvemem/_data/action_space/presets/weak.toml" in names
    assert "evolvemem/_data/prompts/diagnose.md" in names
    target = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(target)
    script = (
        "from evolvemem.paths import action_space_dir, prompts_dir\n"
        "from evolvemem.space.config import load_config\n"
        "from evolvemem.prompts import load_prompt\n"
        "assert '_data' in str(action_space_dir()), action_space_dir()\n"
        "print(load_config('weak')[0].keyword_top_k, len(load_prompt('answer_concise').text) > 0)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(target)}
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, cwd=str(tmp_path))
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["5", "True"]


def test_ray_is_imported_only_when_asked_for(tmp_path):
    """Ray is an optional extra: the package, the CLI and an offline run with the default
    executor never import it (nor does choosing the local executor)."""
    script = (
        "import sys\n"
        "from typer.testing import CliRunner\n"
        "import evolvemem\n"
        "from evolvemem.cli.main import app\n"
        "from evolvemem.executor import make_executor\n"
        "make_executor('local').close()\n"
        f"result = CliRunner().invoke(app, ['run', '--benchmark', 'synth', '--rounds', '1', '--quiet', "
        f"'--out', {str(tmp_path / 'run')!r}])\n"
        "assert result.exit_code == 0, result.output\n"
        "print(sorted(m for m in sys.modules if m == 'ray' or m.startswith('ray.')))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        cwd=str(REPO),
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "[]"
