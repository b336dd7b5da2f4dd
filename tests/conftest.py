"""Shared test setup: offline environment, an isolated cache, and the development data path."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

# pytest-xdist's workers are started with COLUMNS=80 and LINES=24, which squeezes the CLI's tables and
# wraps its lines where a single-process run does not: a worker sees what a one-process run sees.
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.pop("COLUMNS", None)
    os.environ.pop("LINES", None)
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
# Real-model weights are large and verified once: they stay in the user's cache (not the test cache).
os.environ.setdefault(
    "EVOLVEMEM_MODEL_DIR",
    str(
        Path(
            os.environ.get("EVOLVEMEM_CACHE_DIR")
            or (Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "evolvemem")
        )
        / "models"
    ),
)
# One cache per test session: tests never read a developer's cache, and embeddings computed by
# one test are reused by the next.
_SESSION_CACHE = Path(os.environ.get("EVOLVEMEM_TEST_CACHE", "/tmp/evolvemem-test-cache"))
os.environ["EVOLVEMEM_CACHE_DIR"] = str(_SESSION_CACHE)

# The development copy of LoCoMo-10 (8 of its 10 conversations, cut from the official locomo10.json by
# benchmarks/cut_locomo.py); EVOLVEMEM_DEV_DATA points elsewhere (CI hides it with /nonexistent).
DEV_DATA_ENV = "EVOLVEMEM_DEV_DATA"
LOCOMO_DEV = Path(os.environ.get(DEV_DATA_ENV) or REPO_ROOT.parent / "shared" / "data" / "locomo10_dev8.json")
GET_DEV_DATA = (
    "python benchmarks/cut_locomo.py locomo10.json --out locomo10_dev8.json, "
    f"then {DEV_DATA_ENV}=locomo10_dev8.json (see the README's Results)"
)


def in_ci() -> bool:
    """CI sets CI=true: there, a test that lacks its data or model fails instead of skipping."""
    return os.environ.get("CI", "").lower() == "true"


def skip_or_fail(reason: str) -> None:
    """Skip on a user's machine; fail loudly under CI=true, where everything a test needs is installed."""
    if in_ci():
        pytest.fail(f"{reason} (CI=true: CI must provide it)")
    pytest.skip(reason)


def require_dev_data() -> Path:
    """The development LoCoMo file, or a skip (fail in CI) naming it and how to make it."""
    if not LOCOMO_DEV.is_file():
        skip_or_fail(
            f"needs the development LoCoMo file {LOCOMO_DEV} (8 conversations of locomo10.json); "
            f"make it with: {GET_DEV_DATA}"
        )
    return LOCOMO_DEV


@pytest.fixture
def locomo_path() -> Path:
    return require_dev_data()


SKIP_REAL_LLM = "EVOLVEMEM_SKIP_REAL_LLM"


LOCAL_LLM_HOWTO = (
    'pip install -e ".[local-llm]" builds llama.cpp from source: it needs cmake and a C++ compiler '
    "and takes 7-20 minutes on 2 cores"
)


MAX_WORKERS = 4  # each worker loads torch and the embedding model (~0.6 GB); more rarely pays on a laptop


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """`-n auto` (pyproject's addopts): one worker a core, at most MAX_WORKERS."""
    return max(1, min(MAX_WORKERS, os.cpu_count() or 1))


def uses_module_fixture(item: pytest.Item) -> bool:
    """Whether a test reads a fixture built once per module (or class): its file's tests share it."""
    info = getattr(item, "_fixtureinfo", None)
    defs = info.name2fixturedefs.values() if info is not None else ()
    return any(chain and chain[-1].scope in ("module", "class", "package") for chain in defs)


def group_for_workers(items: list[pytest.Item]) -> None:
    """Under pytest-xdist's `--dist loadgroup`: a file whose tests share a module fixture runs whole on
    one worker, so the fixture is built once; every real-model test shares one group, so one llama.cpp
    server at a time reads the CPU; any other test goes to whichever worker is free."""
    for item in items:
        if "real_llm" in item.keywords:
            item.add_marker(pytest.mark.xdist_group("real_llm"))
        elif uses_module_fixture(item):
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::", 1)[0]))


def real_llm_skip_reason() -> str | None:
    """Why the real-model tests skip on this machine, or None when they run (always under CI=true)."""
    if os.environ.get(SKIP_REAL_LLM) == "1":
        return f"{SKIP_REAL_LLM}=1: real-model tests not run"
    if in_ci():
        return None
    from benchmarks.local_llm_server import server_available

    why = server_available()
    return None if why is None else f"real-model tests need llama-cpp-python[server] ({why}); {LOCAL_LLM_HOWTO}"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """`real_llm` tests run against the real local model. EVOLVEMEM_SKIP_REAL_LLM=1 skips them; so does a
    machine without llama-cpp-python (a user who installed only the test extra), with the reason and how to
    install it. Under CI=true they are never skipped for a missing server: the fixture fails loudly."""
    group_for_workers(items)
    real = [item for item in items if "real_llm" in item.keywords]
    reason = real_llm_skip_reason() if real else None
    if reason is None:
        return
    skip = pytest.mark.skip(reason=reason)
    for item in real:
        item.add_marker(skip)


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    """The note is read from the skipped reports, which reach the main process from xdist workers too."""
    skipped = terminalreporter.stats.get("skipped", [])
    if any("real_llm" in getattr(report, "keywords", {}) for report in skipped):
        terminalreporter.write_line(
            f"NOTE: the real_llm tests (llama.cpp + Qwen2.5 0.5B) were skipped - {real_llm_skip_reason()}. "
            "CI runs them.",
            yellow=True,
        )
