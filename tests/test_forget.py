"""Forget means gone: after add → search → answer → forget, the forgotten sentence is in no file the
served memory owns (the store, its WAL, the traces table, the cache directory), and a search racing
the forget leaves no trace behind it. Real DuckDB files, the real embedding cache (in tmp_path)."""

from __future__ import annotations

import threading
import time

import pytest
from typer.testing import CliRunner

from evolvemem import Memory
from evolvemem.serving.forget_audit import audit
from evolvemem.serving.traces import FLUSH_SECONDS

SECRET = "My locker code is 4471-ptarmigan."
CODE = "4471-ptarmigan"
OTHER = "I keep my bicycle in the shed behind the bakery."


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A cache directory of this test alone, so the audit reads only what this memory wrote."""
    root = tmp_path / "cache"
    monkeypatch.setenv("EVOLVEMEM_CACHE_DIR", str(root))
    return root


def found(store, text: str) -> int:
    return audit(store, text).found


def test_forgetting_a_user_leaves_the_sentence_in_no_file(tmp_path, cache):
    from evolvemem.retrieval.embeddings import Embedder

    store = tmp_path / "memory.duckdb"
    with Memory.open(store) as memory:
        memory.add("kim", [{"speaker": "Kim", "text": SECRET}], session="s1", at="2024-05-01")
        memory.add("lee", [{"speaker": "Lee", "text": OTHER}], session="s1", at="2024-05-01")
        assert memory.search("kim", "What is my locker code?").hits
        assert CODE in memory.answer("kim", "What is Kim's locker code?").context
        contents = [m.content for m in memory.memories("kim")]
        assert found(store, CODE) > 0  # the scan sees the text before the forget (WAL, cache)
        assert memory.forget("kim").forgotten_turns == 1  # its traces are still buffered at this point
        time.sleep(FLUSH_SECONDS * 2)  # a trace buffered before the forget would have been written by now
        report = audit(store, SECRET)
        assert report.found == 0 and found(store, CODE) == 0, report.findings
        assert memory.store.traces(user="kim") == []
        assert memory.search("lee", "Where is the bicycle?").hits  # other users untouched
    closed = audit(store, CODE)  # closed: the tables are read too
    assert closed.tables_scanned and closed.found == 0, closed.findings
    assert audit(store, OTHER).found > 0  # what was not forgotten is still there
    fresh = Embedder(cache_root=cache / "embeddings")  # the cache as it is on disk
    assert contents and not any(fresh.cached(text) for text in contents)
    with Memory.open(store) as memory:
        assert memory.search("kim", "locker code").hits == []
        assert memory.search("lee", "Where is the bicycle?").hits


def test_a_search_racing_the_forget_leaves_no_trace(tmp_path, cache):
    store = tmp_path / "memory.duckdb"
    with Memory.open(store) as memory:
        memory.add("kim", [{"speaker": "Kim", "text": SECRET}], session="s1", at="2024-05-01")
        memory.search("kim", "locker code")  # loaded and embedded: the racing searches are quick
        stop = threading.Event()
        served = []

        def search_until_stopped() -> None:
            while not stop.is_set():
                served.append(len(memory.answer("kim", "What is Kim's locker code?").memory_ids))

        threads = [threading.Thread(target=search_until_stopped) for _ in range(3)]
        for thread in threads:
            thread.start()
        time.sleep(0.5)
        memory.forget("kim")
        time.sleep(0.3)
        stop.set()
        for thread in threads:
            thread.join()
        assert any(served) and served[-1] == 0  # answers before the forget, none after
        time.sleep(FLUSH_SECONDS * 2)
        assert memory.store.traces(user="kim") == []
    assert found(store, CODE) == 0


def test_forgetting_a_session_takes_its_traces_and_text(tmp_path, cache):
    store = tmp_path / "memory.duckdb"
    with Memory.open(store) as memory:
        memory.add("kim", [{"speaker": "Kim", "text": SECRET}], session="s1", at="2024-05-01")
        memory.add("kim", [{"speaker": "Kim", "text": OTHER}], session="s2", at="2024-05-02")
        memory.answer("kim", "What is Kim's locker code?")
        bicycle = memory.search("kim", "Where does Kim keep the bicycle?", limit=1)
        assert len(bicycle.hits) == 1 and OTHER in bicycle.hits[0].text  # this trace cites s2 alone
        memory.traces.flush()
        assert memory.forget("kim", session="s1").forgotten_turns == 1
        kept = memory.store.traces(user="kim")
        assert [t.query for t in kept] == ["Where does Kim keep the bicycle?"]  # the one citing s1 went
        assert found(store, CODE) == 0
    assert found(store, OTHER) > 0


def test_forget_audit_command_names_the_files(tmp_path, cache):
    from evolvemem.cli.main import app

    store = tmp_path / "memory.duckdb"
    with Memory.open(store) as memory:
        memory.add("kim", [{"speaker": "Kim", "text": SECRET}])
    result = CliRunner().invoke(app, ["forget-audit", "--store", str(store), "--text", CODE])
    assert result.exit_code == 1, result.output
    assert "memory.duckdb" in result.output
    with Memory.open(store) as memory:
        memory.forget("kim")
    result = CliRunner().invoke(app, ["forget-audit", "--store", str(store), "--text", CODE, "--json"])
    assert result.exit_code == 0, result.output
    assert '"found": 0' in result.output


def test_http_delete_leaves_the_sentence_in_no_file(tmp_path, cache):
    """The same bar through `evolve serve`: add → search → answer → DELETE (no wait), then a clean stop."""
    import httpx

    from tests.serve_server import ServeProcess

    store = tmp_path / "memory.duckdb"
    with ServeProcess(store, env={"EVOLVEMEM_CACHE_DIR": str(cache)}) as server:
        api = httpx.Client(base_url=server.url, timeout=60)
        turns = [{"speaker": "Kim", "text": SECRET, "at": "2024-05-01"}]
        assert api.post("/v1/memories", json={"user": "kim", "turns": turns}).status_code == 200
        assert api.post("/v1/search", json={"user": "kim", "query": "What is my locker code?"}).json()["hits"]
        assert api.post("/v1/answer", json={"user": "kim", "query": "What is Kim's locker code?"}).status_code == 200
        assert found(store, CODE) > 0
        assert api.delete("/v1/users/kim").json()["forgotten_turns"] == 1
        time.sleep(FLUSH_SECONDS * 2)
        assert found(store, CODE) == 0
    report = audit(store, SECRET)
    assert report.tables_scanned and report.found == 0, report.findings
    assert found(store, CODE) == 0


def test_a_model_answering_leaves_no_reply_behind_a_forget(tmp_path, cache, monkeypatch):
    """Model replies are kept beside the store (a reply cannot say whose turns its prompt held), so a
    forget clears them: with a model answering too, the forgotten text is in no file."""
    from evolvemem.roles.factory import ModelSettings
    from evolvemem.serving.store import replies_of
    from tests.fake_llm_server import FakeLLMServer

    monkeypatch.setenv("OPENAI_API_KEY", "none")  # the local server takes any key
    store = tmp_path / "memory.duckdb"
    with FakeLLMServer() as server:  # echoes the prompt back: its reply holds the context
        models = ModelSettings(answer_model="openai/fake-model", api_base=server.url)
        with Memory.open(store, models=models) as memory:
            memory.add("kim", [{"speaker": "Kim", "text": SECRET}], session="s1", at="2024-05-01")
            assert not memory.answer("kim", "What is Kim's locker code?").failed
            replies = [p for p in replies_of(store).rglob("*.json")]
            assert replies and any(CODE in p.read_text() for p in replies)  # kept beside the store
            assert not (cache / "llm").exists()  # not in the user's shared reply cache
            memory.forget("kim")
            time.sleep(FLUSH_SECONDS * 2)
            report = audit(store, CODE)
            assert report.found == 0, report.findings
