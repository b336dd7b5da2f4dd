"""Shared test setup: offline environment, an isolated cache, and the development data path."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
# Real-model weights are large and verified once: they stay in the user's cache (not the test cache).
os.environ.setdefault("EVOLVEMEM_MODEL_DIR", str(Path(os.environ.get("EVOLVEMEM_CACHE_DIR") or (
    Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "evolvemem")) / "models"))
# One cache per test session: tests never read a developer's cache, and embeddings computed by
# one test are reused by the next.
_SESSION_CACHE = Path(os.environ.get("EVOLVEMEM_TEST_CACHE", "/tmp/evolvemem-test-cache"))
os.environ["EVOLVEMEM_CACHE_DIR"] = str(_SESSION_CACHE)

LOCOMO_DEV = REPO_ROOT.parent / "shared" / "data" / "locomo10_dev8.json"


@pytest.fixture
def locomo_path() -> Path:
    if not LOCOMO_DEV.is_file():
        pytest.skip("development LoCoMo file not available")
    return LOCOMO_DEV


SKIP_REAL_LLM = "EVOLVEMEM_SKIP_REAL_LLM"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """`real_llm` tests run against the real local model; EVOLVEMEM_SKIP_REAL_LLM=1 skips them
    (a developer machine without the llama.cpp build), and the summary says so."""
    if os.environ.get(SKIP_REAL_LLM) != "1":
        return
    skip = pytest.mark.skip(reason=f"{SKIP_REAL_LLM}=1: real-model tests not run")
    for item in items:
        if "real_llm" in item.keywords:
            item.add_marker(skip)


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    if os.environ.get(SKIP_REAL_LLM) == "1":
        terminalreporter.write_line(f"NOTE: {SKIP_REAL_LLM}=1 - the real_llm tests (llama.cpp + Qwen2.5 0.5B) "
                                    "were skipped; CI runs them.", yellow=True)


@pytest.fixture(autouse=True)
def base_action_space():
    """Levers a test's run materialised (or a config it loaded carried) join the process-wide
    registry: every test starts and ends with the action-space files' dimensions only."""
    from evolvemem.space.registry import forget_added_dimensions

    forget_added_dimensions()
    yield
    forget_added_dimensions()
