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
