"""The ONNX export of a sentence-transformers model, made once on this machine and cached.

Key: the CONTENT of the model's files (weights, configs, tokenizer; not READMEs or other formats'
weights), hashed, plus EXPORT_VERSION: another model, or the same name with changed weights,
never reuses a stale export. Folder: `models_dir()/onnx/<model-slug>-<hash>/` with

- `encoder.json` (tokenizer settings the runtime needs: max length, special ids, inputs),
- `tokenizer.json` (the model's own fast tokenizer; ONNX Runtime needs no transformers),
- `model.onnx` (fp32) and, when asked for, `model-int8.onnx` (dynamic int8 quantisation of it).

Every file is written to a temporary name and moved into place, the model last, so a crash leaves
no half export; an export ONNX Runtime cannot read is reported in one line and made again.

The graph is the whole sentence-transformers module stack (transformer, pooling, any dense or
normalise module), exported with dynamic batch and sequence axes, giving `token_embeddings` and
`sentence_embedding`. Attention is exported in its plain ("eager") form rather than torch's fused
SDPA call, which the exporter unrolls into a slower graph: measured 1.3x the batch throughput and half
the single-text latency on the 2-core development VM, same vectors (1e-7). Pooling in the graph rather than in numpy: whatever pooling a model
declares (mean, CLS, max, a dense head) is reproduced by the model's own code, not by a second
implementation here that could drift from it; the cost is a few element-wise ops per batch."""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import tempfile
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Iterator

from evolvemem.errors import ConfigError
from evolvemem.paths import models_dir, write_atomic
from evolvemem.retrieval.model_files import model_folder, model_slug

log = logging.getLogger(__name__)

EXPORT_VERSION = "1"  # bump when the graph's inputs, outputs or export settings change
OPSET = 17
_SKIP_DIRS = frozenset({".git", ".cache", "onnx", "openvino"})
_SKIP_SUFFIXES = frozenset({".md", ".h5", ".msgpack", ".ot", ".onnx", ".onnx_data", ".xml", ".gitattributes"})
_INPUTS = ("input_ids", "attention_mask", "token_type_ids")
_OUTPUTS = ("token_embeddings", "sentence_embedding")


@dataclass(frozen=True)
class ExportInfo:
    """What the runtime needs besides the graph (encoder.json)."""

    model_name: str
    max_length: int
    special_ids: tuple[int, ...]
    dimension: int
    inputs: tuple[str, ...]
    lower_case: bool


@dataclass(frozen=True)
class Export:
    """A ready export: its folder, its settings and the graph file to run."""

    folder: Path
    info: ExportInfo
    graph: Path


def model_content_hash(folder: Path) -> str:
    """sha256 over the relative path and bytes of every file that shapes the model's outputs."""
    digest = hashlib.sha256(f"export {EXPORT_VERSION}\n".encode())
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        relative = path.relative_to(folder)
        if _SKIP_DIRS.intersection(relative.parts[:-1]) or path.suffix in _SKIP_SUFFIXES or path.name in _SKIP_SUFFIXES:
            continue
        digest.update(f"{relative.as_posix()}\n".encode())
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


def export_folder(model_name: str) -> Path:
    """Where `model_name`'s export lives (it may not exist yet)."""
    return models_dir() / "onnx" / f"{model_slug(model_name)}-{model_content_hash(model_folder(model_name))[:20]}"


def ensure_export(model_name: str, *, int8: bool) -> Export:
    """The export of `model_name` (fp32, or int8 when `int8`), made now if missing or unreadable."""
    folder = export_folder(model_name)
    fp32 = folder / "model.onnx"
    if not _readable(fp32, folder):
        _export(model_name, folder)
    graph = fp32
    if int8:
        graph = folder / "model-int8.onnx"
        if not _readable(graph, folder):
            _quantise(fp32, graph)
    info = _read_info(folder)
    if info is None:  # the graph is there but its settings are not: make both again
        _export(model_name, folder)
        info = _read_info(folder)
        assert info is not None
    return Export(folder, info, graph)


def _readable(graph: Path, folder: Path) -> bool:
    """Whether the graph and its settings are in place (whether ONNX Runtime can read the graph
    is learnt by loading it: `discard_unreadable`)."""
    return graph.is_file() and (folder / "encoder.json").is_file()


def discard_unreadable(graph: Path, error: BaseException) -> None:
    """Report in one line that ONNX Runtime could not read `graph`, and remove it, so the next
    `ensure_export` makes it again."""
    first_line = (str(error).strip().splitlines() or [type(error).__name__])[0]
    log.warning("the ONNX export %s is unreadable (%s); exporting it again", graph, first_line[:200])
    graph.unlink(missing_ok=True)


def _read_info(folder: Path) -> ExportInfo | None:
    try:
        data = json.loads((folder / "encoder.json").read_text())
        return ExportInfo(
            model_name=str(data["model_name"]),
            max_length=int(data["max_length"]),
            special_ids=tuple(int(i) for i in data["special_ids"]),
            dimension=int(data["dimension"]),
            inputs=tuple(str(i) for i in data["inputs"]),
            lower_case=bool(data["lower_case"]),
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _export(model_name: str, folder: Path) -> None:
    """Export the model through torch (loaded for this only) into `folder`, atomically."""
    from evolvemem.retrieval.encoder_torch import TorchEncoder

    reference = TorchEncoder.load(model_name, attention="eager")
    model = reference.model
    backend = getattr(model.tokenizer, "backend_tokenizer", None)
    if backend is None:
        raise ConfigError(
            f"embedding model {model_name!r} has no fast tokenizer, which the onnx encoder needs: use --encoder torch"
        )
    sample = model.tokenizer(["an export sample", "a second, longer export sample"], padding=True, return_tensors="pt")
    inputs = tuple(name for name in _INPUTS if name in sample)
    info = ExportInfo(
        model_name=model_name,
        max_length=reference.max_length,
        special_ids=tuple(sorted(reference.special_ids)),
        dimension=reference.dimension,
        inputs=inputs,
        lower_case=bool(getattr(model[0], "do_lower_case", False)),
    )
    folder.mkdir(parents=True, exist_ok=True)
    write_atomic(folder / "tokenizer.json", backend.to_str())
    write_atomic(folder / "encoder.json", json.dumps(asdict(info), indent=1))
    try:
        _write_graph(model, tuple(sample[name] for name in inputs), inputs, folder / "model.onnx")
    except Exception as exc:  # noqa: BLE001 - the exporter fails in many ways; the user needs one line
        first_line = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise ConfigError(
            f"embedding model {model_name!r} could not be exported to ONNX ({first_line[:200]}): use --encoder torch"
        ) from None


def _write_graph(model: Any, sample: tuple[Any, ...], inputs: tuple[str, ...], target: Path) -> None:
    import torch

    class _Stack(torch.nn.Module):
        """The sentence-transformers stack with positional inputs and a tuple output (what
        the exporter traces)."""

        def __init__(self) -> None:
            super().__init__()
            self.stack = model

        def forward(self, *tensors: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            out = self.stack(dict(zip(inputs, tensors)))
            return out["token_embeddings"], out["sentence_embedding"]

    axes = {name: {0: "batch", 1: "sequence"} for name in (*inputs, "token_embeddings")}
    axes["sentence_embedding"] = {0: "batch"}
    handle, temp = tempfile.mkstemp(dir=target.parent, prefix=f".tmp-{target.name}-", suffix=".part")
    os.close(handle)
    try:
        with torch.no_grad(), _quiet_export():
            torch.onnx.export(
                _Stack().eval(),
                sample,
                temp,
                input_names=list(inputs),
                output_names=list(_OUTPUTS),
                dynamic_axes=axes,
                opset_version=OPSET,
                dynamo=False,  # the TorchScript exporter: dynamic axes without onnxscript
            )
        os.replace(temp, target)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise


def _quantise(fp32: Path, target: Path) -> None:
    """Dynamic int8 quantisation of the fp32 graph: the weight matrices only (a MatMul with a
    constant input), per output channel. Measured on 10 varied texts with MiniLM: cosine to the fp32
    vectors 0.971-0.996 this way; 0.877-0.975 quantising every MatMul per tensor (the default),
    which also quantises attention's activation-by-activation products."""
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    graph = onnx.load(str(fp32), load_external_data=False)
    constants = {init.name for init in graph.graph.initializer}
    weighted = [n.name for n in graph.graph.node if n.op_type == "MatMul" and constants.intersection(n.input)]
    handle, temp = tempfile.mkstemp(dir=target.parent, prefix=f".tmp-{target.name}-", suffix=".part")
    os.close(handle)
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    root.setLevel(logging.ERROR)  # the quantiser logs a pre-processing hint on the root logger
    try:
        quantize_dynamic(fp32, temp, weight_type=QuantType.QInt8, per_channel=True, nodes_to_quantize=weighted)
        os.replace(temp, target)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
    finally:
        # a module the quantiser imports on the way runs logging.basicConfig, giving the root logger a
        # handler: every library logger that sets its own level (bm25s: DEBUG) would then print to the
        # user's terminal for the rest of the run
        for added in [h for h in root.handlers if h not in handlers]:
            root.removeHandler(added)
        root.setLevel(level)


@contextlib.contextmanager
def _quiet_export() -> Iterator[None]:
    """The exporter's deprecation and tracer warnings are about its own internals, not the user's
    model: silenced while it runs."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield
